"""Simulated nodes for scale measurements: no Spark, no TensorFlow, the real control protocol.

:class:`SimBackend` is a ``SparkBackend`` whose barrier "stage" is a few worker processes started
ahead of time (so that interpreter start-up is not measured). When the driver's real ``Run``
submits an attempt, each process gets its share of the tasks and plays every one of them on a
thread of its own, as ``runtime/node/task/task.py`` does on an executor: connect with the run's secret
(``channel.connect``), ``Register``, wait for the ``Cluster`` spec, report ``running``, stream
``Logs`` lines and ``Files`` event-file chunks, report a ``Result`` (the chief returns the number
of nodes) and close.

Run as ``python bench/simnodes.py`` it is such a worker process: one JSON line on stdin says what
to play, one JSON line on stdout says how it went.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tfos_notebook.runtime.driver.spark import ClusterView, ExecutorInfo, SparkBackend  # noqa: E402
from tfos_notebook.runtime.wire import channel  # noqa: E402
from tfos_notebook.runtime.wire import messages as m  # noqa: E402


@dataclass(frozen=True)
class Workload:
    """What every simulated node sends once the cluster is up: ``log_batches`` ``Logs`` messages
    of ``lines_per_batch`` lines, and ``file_chunks`` ``Files`` chunks of ``chunk_bytes``."""

    log_batches: int = 10
    lines_per_batch: int = 20
    file_chunks: int = 4
    chunk_bytes: int = 16 << 10


def play_node(host: str, port: int, secret: bytes, attempt: int, task: int, num_nodes: int,
              work: Workload) -> float:
    """One node's part, start to end; returns the seconds its connect and handshake took."""
    t0 = time.monotonic()
    conn = channel.connect(host, port, secret, timeout=120)
    connected = time.monotonic() - t0
    try:
        conn.send(m.encode(m.Register(task=task, attempt=attempt, host="127.0.0.1", port=40000 + task,
                                      pid=os.getpid(), executor_id=str(task % 64))))
        while not isinstance(reply := m.decode(conn.recv()), m.Cluster):
            if isinstance(reply, m.Stop):
                raise RuntimeError(f"task {task} was told to stop instead of getting the cluster spec")
            if isinstance(reply, m.Ping):  # answered as a node does, or the driver takes it for lost
                conn.send(m.encode(m.Pong(reply.seq)))
        conn.send(m.encode(m.NodeStateReport("running", os.getpid())))
        chunk = (b"%08d" % task) * (work.chunk_bytes // 8)
        for i in range(max(work.log_batches, work.file_chunks)):
            if i < work.log_batches:
                conn.send(m.encode(m.Logs(tuple(("stdout", f"task {task} step {i} line {j}: loss=0.{j:03d}")
                                                for j in range(work.lines_per_batch)))))
            if i < work.file_chunks:
                conn.send(m.encode(m.Files(((f"events.out.tfevents.{task}.sim", i * len(chunk), chunk),))))
        value = pickle.dumps(num_nodes if task == 0 else None)
        conn.send(m.encode(m.Result(ok=True, value=value, value_type="int", exit_code=0)))
    finally:
        conn.close()
    return connected


def worker_main() -> None:
    """A worker process: say it is ready, wait for the go line, play its tasks on threads, print
    a summary."""
    print("ready", flush=True)
    line = sys.stdin.readline()
    if not line:  # the driver ended without a barrier stage
        return
    order = json.loads(line)
    secret, work = bytes.fromhex(order["secret"]), Workload(**order["work"])
    handshakes: list[float] = []
    errors: list[str] = []

    def one(task: int) -> None:
        try:
            handshakes.append(play_node(order["host"], order["port"], secret, order["attempt"], task,
                                        order["num_nodes"], work))
        except Exception as e:  # reported to the driver in the summary
            errors.append(f"task {task}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=one, args=(t,), daemon=True) for t in order["tasks"]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"nodes": len(threads), "max_handshake": max(handshakes, default=0.0), "errors": errors}))


class SimBackend(SparkBackend):
    """A backend with ``slots`` task slots whose barrier stage is ``procs`` worker processes
    playing the nodes (see the module docstring). ``go_at`` is the wall-clock time the nodes were
    released; ``summaries`` what each process reported. The constructor returns once every process
    has imported what it needs."""

    kind = "simulated"

    def __init__(self, slots: int, procs: int = 4, work: Workload = Workload()) -> None:
        self.slots, self.work = slots, work
        self.go_at: float | None = None
        self.summaries: list[dict] = []
        self._procs = [subprocess.Popen([sys.executable, str(HERE / "simnodes.py")], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True) for _ in range(procs)]
        for proc in self._procs:
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError("a simulated node process died while starting")

    @property
    def master(self) -> str:
        return f"simulated[{self.slots}]"

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
        pass

    def clear_tag(self, tag):
        pass

    def cancel(self, tag):
        self.close()

    def barrier(self, num_tasks, fn):
        orders = [{"host": fn.server_host, "port": fn.server_port, "secret": fn.secret.key.hex(), "attempt": fn.attempt,
                   "num_nodes": num_tasks, "work": asdict(self.work),
                   "tasks": list(range(i, num_tasks, len(self._procs)))} for i in range(len(self._procs))]
        self.go_at = time.time()
        for proc, order in zip(self._procs, orders, strict=True):
            proc.stdin.write(json.dumps(order) + "\n")
            proc.stdin.flush()
        self.summaries = [json.loads(proc.stdout.readline() or "{}") for proc in self._procs]
        self.close()
        errors = [e for s in self.summaries for e in s.get("errors", ["a worker process died"])]
        if errors:
            raise RuntimeError(f"{len(errors)} simulated nodes failed, first: {errors[0]}")
        return [{"task": t} for t in range(num_tasks)]

    def hadoop_fs(self, uri):
        raise NotImplementedError("simulated nodes write no shared storage")

    def close(self) -> None:
        """End the worker processes (they end by themselves after a barrier stage)."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.stdin.close()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


if __name__ == "__main__":
    worker_main()
