"""A run whose Spark is scripted: ``FakeBackend``'s barrier "tasks" are threads that play nodes
(``FakeNode``), connecting to the run's real control server with the run's secret and speaking the
real typed protocol, as a node would. Shared by the lifecycle tests and the control channel's fuzzer;
no Spark and no TensorFlow."""

from __future__ import annotations

import pickle
import threading
import time

from tfos_notebook.runtime.driver.errors import (
    ChannelError,
)
from tfos_notebook.runtime.driver.events import (
    RunStateChanged,
)
from tfos_notebook.runtime.driver.run.launch import Run
from tfos_notebook.runtime.driver.spark import ClusterView, ExecutorInfo, SparkBackend
from tfos_notebook.runtime.host.versions import installed_versions
from tfos_notebook.runtime.wire import channel
from tfos_notebook.runtime.wire import messages as m


class Cancelled(Exception):
    pass


class FakeBackend(SparkBackend):
    """A cluster of ``slots`` task slots whose barrier tasks run ``script(plan, task, attempt)`` on threads."""

    kind = "fake"

    def __init__(self, script, slots: int = 4) -> None:
        self.script, self.slots = script, slots
        self.cancelled: list[str] = []
        self.jobs = 0
        self._tags = threading.local()
        self._cancel = threading.Event()

    @property
    def master(self) -> str:
        return "fake[4]"

    def conf(self, key, default=None):
        return {"spark.driver.host": "127.0.0.1"}.get(key, default)

    def default_fs(self) -> str:
        return "file:///"

    def cluster(self, own_tag=None) -> ClusterView:
        return ClusterView(executors=(ExecutorInfo("0", "127.0.0.1", self.slots, ()),), total_slots=self.slots)

    def task_errors(self, tag):
        return ()

    def job_thread(self, target, name):
        return threading.Thread(target=target, name=name, daemon=True)

    def set_tag(self, tag, description):
        self._tags.tag = tag

    def clear_tag(self, tag):
        self._tags.tag = None

    def cancel(self, tag):
        self.cancelled.append(tag)
        self._cancel.set()

    def barrier(self, num_tasks, fn):
        self.jobs += 1
        self._cancel.clear()
        out: list = [None] * num_tasks
        threads = [threading.Thread(target=lambda t=t: out.__setitem__(t, self.script(fn, t, self._cancel)),
                                    daemon=True) for t in range(num_tasks)]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.05)
                if self._cancel.is_set():
                    raise Cancelled("job cancelled")
        return out

    def hadoop_fs(self, uri):
        raise NotImplementedError


class FakeNode:
    """One scripted node: registers like ``runtime.node.task`` does and reports what it is told to."""

    def __init__(self, plan, task: int) -> None:
        self.plan, self.task = plan, task
        self.conn = channel.connect(plan.server_host, plan.server_port, plan.secret, timeout=5)

    def send(self, msg: m.Message) -> None:
        self.conn.send(m.encode(msg))

    def recv(self) -> m.Message:
        """The driver's next message other than a ping (answered, as a node does)."""
        while isinstance(msg := m.decode(self.conn.recv()), m.Ping):
            self.send(m.Pong(msg.seq))
        return msg

    def register(self, attempt: int | None = None) -> m.Message:
        self.send(m.Register(task=self.task, attempt=self.plan.attempt if attempt is None else attempt,
                             host="127.0.0.1", port=40000 + self.task, pid=1000 + self.task,
                             **installed_versions()))
        return self.recv()

    def answer_pings(self, seconds: float) -> None:
        """Stay connected and answer the driver's pings for ``seconds`` (as a busy node does)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self.conn.sock.settimeout(left)
            try:
                msg = m.decode(self.conn.recv())
            except TimeoutError:
                break
            if isinstance(msg, m.Ping):
                self.send(m.Pong(msg.seq))
        self.conn.sock.settimeout(None)

    def wait_for_stop(self, timeout: float = 10) -> m.Stop | None:
        """The driver's ``Stop`` (None: the connection ended, or none came in ``timeout`` seconds)."""
        self.conn.sock.settimeout(timeout)
        try:
            while True:
                if isinstance(msg := self.recv(), m.Stop):
                    return msg
        except (OSError, ChannelError):
            return None

    def close(self) -> None:
        self.conn.close()


def finish_with(value):
    def script(plan, task, cancel):
        node = FakeNode(plan, task)
        assert isinstance(node.register(), m.Cluster)
        node.send(m.NodeStateReport("running", 1))
        node.send(m.Result(ok=True, value=pickle.dumps(value if task == 0 else None), value_type="int", exit_code=0))
        node.close()
        return {"task": task}

    return script


def start(script, nodes: int = 2, **kwargs) -> Run:
    run = Run(FakeBackend(script), lambda args, ctx: None, None, nodes, stop_grace_secs=0.5, preflight_wait=0,
              **kwargs)
    return run.start()


def states(run: Run) -> list[str]:
    return [e.state for e in run.events.events(RunStateChanged)]
