"""The node: what runs inside each barrier task on an executor.

register with the driver (holding a TensorFlow port open) -> receive the cluster spec -> set
TF_CONFIG / CUDA_VISIBLE_DEVICES -> run the user's function in a child process in its own process
group -> stream its output and progress to the driver -> report the outcome. The child is killed
with its whole group when the driver says stop, when the task ends for any reason, and (by the
child's own watchdog) when this process dies.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

from . import channel, storage
from . import messages as m
from .ctx import (
    FOREGROUND_ROLES,
    NodeContext,
    installed_versions,
    is_shared_logdir,
    local_path,
    node_dir_name,
    tf_config,
)
from .errors import ChannelError
from .gpusampler import GpuSampler
from .logship import LogShipper
from .nodeproc import Forwarder, pump_lines, pump_status, spawn_child
from .orphans import kill_attempts_before, pid_dir
from .procs import kill_process_group

if TYPE_CHECKING:
    from .feed.instage_task import LocalFeed

log = logging.getLogger(__name__)

MAX_RESULT_BYTES = 32 << 20


@dataclass
class NodePlan:
    """Everything a node needs, shipped to the executors in the task closure (pickled by Spark)."""

    run_id: str
    server_host: str
    server_port: int
    secret: bytes
    main_fun: Any
    args: Any
    roles: list[tuple[str, int]]
    default_fs: str
    working_dir: str
    model_dir: str | None = None
    model_dir_probe: str | None = None  # storage.write_probe: the driver's file in a local model dir
    log_dir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    legacy_keras: bool | None = None
    attempt: int = 0
    stop_grace_secs: float = 5.0
    feed_buffer_bytes: int = 0  # > 0: InputMode.SPARK, chief and workers serve a data feed this big
    instage: Any = None  # feed.instage.InStage: each node's own task feeds it its partition

    def __call__(self, task: int, gpus: list[str]) -> dict:  # the barrier task's body (SparkBackend.barrier)
        return run_node(self, task, gpus)

    def fed(self, task: int, gpus: list[str], items: Iterator) -> Iterator:
        """The barrier task's body over data (``SparkBackend.barrier_over``): the node, fed its partition."""
        from .feed.instage_task import run_fed_node

        return run_fed_node(self, task, gpus, items)


def spark_executor_id() -> str:
    """The Spark executor id of this Python worker ("driver" in local mode)."""
    url = os.environ.get("SPARK_LOG_URL_STDERR", "")
    if url:
        ids = parse_qs(urlparse(url).query).get("executorId")
        if ids:
            return ids[0]
    cwd = os.getcwd()
    if os.path.basename(os.path.dirname(cwd)).startswith("app-"):
        return os.path.basename(cwd)
    return "driver"


def node_log_dir(plan: NodePlan, role: str, index: int, workdir: str) -> tuple[str, bool]:
    """This node's log directory, and whether its new bytes must be shipped to the driver.

    A shared log directory (a URI other than ``file://``, or a ``/dbfs/`` path) is written directly,
    one subdirectory per node. Otherwise the node writes on its own disk (under the given path,
    which the driver made absolute, or a temporary one when the run has no log_dir) and ships what
    it writes.
    """
    name = node_dir_name(role, index)
    if is_shared_logdir(plan.log_dir):
        return f"{plan.log_dir.rstrip('/')}/{name}", False
    local = local_path(plan.log_dir)
    path = os.path.join(local or os.path.join(workdir, "logs"), name)
    os.makedirs(path, exist_ok=True)
    return path, True


def run_node(plan: NodePlan, task: int, gpus: list[str], local_feed: LocalFeed | None = None) -> dict:
    """Run one node of the cluster; returns a small summary for Spark to collect. The outcome that
    matters travels to the driver over the control channel."""
    role, index = plan.roles[task]
    if plan.attempt:  # a relaunch: what the lost attempt left on this host must not write beside us
        kill_attempts_before(plan.run_id, plan.attempt)
    workdir = tempfile.mkdtemp(prefix=f"tfos-{plan.run_id}-{task}-")
    proc, status_r = spawn_child(plan, task, gpus, workdir)  # starts up while the cluster reserves
    pid_file = os.path.join(pid_dir(), f"{plan.run_id}-{task}.json")
    conn = None
    try:
        with open(pid_file, "w") as f:
            json.dump({"run_id": plan.run_id, "task": task, "role": f"{role}:{index}", "pid": proc.pid,
                       "pgid": proc.pid, "node_pid": os.getpid(), "started": time.time()}, f)
        conn = channel.connect(plan.server_host, plan.server_port, plan.secret)
        host = conn.sock.getsockname()[0]  # the address on which this executor reaches the driver
        reservation = socket.socket()
        reservation.bind((host, 0))
        port = reservation.getsockname()[1]
        conn.send(m.encode(m.Register(task=task, attempt=plan.attempt, host=host, port=port, pid=os.getpid(),
                                      gpus=tuple(gpus), executor_id=spark_executor_id(), hostname=socket.gethostname(),
                                      sees_model_dir=storage.sees(plan.model_dir_probe), **installed_versions())))
        started = threading.Event()
        reporter = threading.Thread(target=_report_leftovers, args=(plan.run_id, conn, host, started), daemon=True)
        reporter.start()
        orders = _Orders(conn)
        reply = orders.next()
        if reply is None:
            raise ConnectionError("the connection to the driver closed before every node registered")
        if not isinstance(reply, m.Cluster):
            reservation.close()
            return {"task": task, "outcome": "stopped"}
        spec = reply.cluster_spec
        import cloudpickle

        log_dir, ship_logs = node_log_dir(plan, role, index, workdir)
        ctx = NodeContext(run_id=plan.run_id, executor_id=task, job_name=role, task_index=index,
                          cluster_spec=spec, defaultFS=plan.default_fs, working_dir=plan.working_dir, host=host,
                          spark_executor_id=spark_executor_id(), gpus=gpus, model_dir=plan.model_dir,
                          log_dir=log_dir, attempt=plan.attempt, model_dir_shared=reply.model_dir_shared)
        payload, result_path = os.path.join(workdir, "payload.pkl"), os.path.join(workdir, "result.pkl")
        feed = None
        if plan.feed_buffer_bytes and role in FOREGROUND_ROLES:
            from .feed.server import FeedServer

            feed = FeedServer(plan.secret, host, plan.feed_buffer_bytes)
        with open(payload, "wb") as f:
            cloudpickle.dump({"main_fun": plan.main_fun, "args": plan.args, "ctx": ctx, "feed": feed}, f)
        reservation.close()  # release the port just before TensorFlow binds it
        go = {"payload": payload, "result": result_path, "env": {"TF_CONFIG": tf_config(spec, role, index)}}
        proc.stdin.write((json.dumps(go) + "\n").encode())
        proc.stdin.close()
        conn.send(m.encode(m.NodeStateReport("running", proc.pid)))
        started.set()
        sampler = GpuSampler(conn, gpus).start()
        try:
            return _supervise(plan, task, proc, status_r, result_path, orders, log_dir if ship_logs else None,
                              reporter, local_feed)
        finally:
            sampler.stop()
    finally:
        kill_process_group(proc, 0.5)
        try:
            os.remove(pid_file)
        except OSError as e:
            log.debug("could not remove the pid record %s: %s", pid_file, e)
        shutil.rmtree(workdir, ignore_errors=True)
        if conn is not None:
            conn.close()


def _supervise(plan: NodePlan, task: int, proc: subprocess.Popen, status_r: int, result_path: str,
               orders: _Orders, ship_dir: str | None, reporter: threading.Thread,
               local_feed: LocalFeed | None) -> dict:
    """Forward the child's output, progress and (from ``ship_dir``) event files, obey stop, and
    report its outcome."""
    conn = orders.conn
    fwd = Forwarder(conn)
    pumps = [threading.Thread(target=pump_lines, args=(proc.stdout, "stdout", fwd), daemon=True),
             threading.Thread(target=pump_lines, args=(proc.stderr, "stderr", fwd), daemon=True),
             threading.Thread(target=pump_status, args=(os.fdopen(status_r, "rb"), fwd, local_feed), daemon=True)]
    for t in pumps:
        t.start()
    shipper = LogShipper(conn, ship_dir).start() if ship_dir else None
    stopped = threading.Event()

    def listen() -> None:  # the driver may tell this node to stop at any time
        while True:
            msg = orders.next()
            if msg is None:  # lost the driver: do not train on alone
                if proc.poll() is None:
                    stopped.set()
                    kill_process_group(proc, plan.stop_grace_secs)
                return
            if isinstance(msg, m.Stop):
                stopped.set()
                kill_process_group(proc, plan.stop_grace_secs)
                return
            if isinstance(msg, (m.FilesResend, m.FilesRewind)) and shipper is not None:
                shipper.on_message(msg)

    def watch_driver() -> None:  # no word for DRIVER_SILENT_SECS: the driver (or our network) is gone
        while proc.poll() is None:
            if time.monotonic() - orders.heard > m.DRIVER_SILENT_SECS:
                log.warning("no word from the driver for %.0fs: ending the node's process", m.DRIVER_SILENT_SECS)
                conn.close()  # ends the reading thread, and so listen(), which kills the process group
                return
            time.sleep(1.0)

    threading.Thread(target=listen, daemon=True, name="tfos-listen").start()
    threading.Thread(target=watch_driver, daemon=True, name="tfos-watch-driver").start()
    exit_code = proc.wait()
    for t in pumps:
        t.join(timeout=5)
    fwd.close()
    if shipper is not None:
        shipper.close()  # every event-file byte reaches the driver before the result
    msg = _result_message(_read_result(result_path), exit_code, stopped.is_set())
    reporter.join(10)  # the leftover report goes out before the result closes the node's account
    try:
        conn.send(m.encode(msg))
    except OSError as e:
        log.warning("could not report the result to the driver: %s", e)
    return {"task": task, "outcome": "ok" if msg.ok else "error"}


def _result_message(outcome: tuple | None, exit_code: int, stopped: bool) -> m.Result:
    """The ``Result`` for the child's outcome (``("ok", value_bytes, type_name)`` or ``("error", tb)``)."""
    if stopped:
        return m.Result(ok=False, stopped=True, exit_code=exit_code)
    if outcome and outcome[0] == "ok":
        value = outcome[1]
        if len(value) > MAX_RESULT_BYTES:
            return m.Result(ok=False, exit_code=exit_code,
                            traceback=f"the function returned {len(value)} bytes; at most {MAX_RESULT_BYTES} "
                                      "can travel back to the driver: write large results to storage instead")
        return m.Result(ok=True, value=value, value_type=outcome[2] if len(outcome) > 2 else "", exit_code=exit_code)
    tb = outcome[1] if outcome else ""
    if not tb and exit_code < 0:
        tb = f"the process was killed by signal {signal.Signals(-exit_code).name}"
    return m.Result(ok=False, traceback=tb, exit_code=exit_code)


class _Orders:
    """The driver's messages to this node, read on a thread of their own so that pings are answered
    at once whatever the node is doing. ``next()`` returns the next message other than a ping, or
    None once the connection is gone; ``heard`` is when the driver last said anything."""

    def __init__(self, conn: channel.Connection) -> None:
        self.conn = conn
        self.heard = time.monotonic()
        self._queue: queue.SimpleQueue[m.Message | None] = queue.SimpleQueue()
        threading.Thread(target=self._read, daemon=True, name="tfos-orders").start()

    def next(self) -> m.Message | None:
        return self._queue.get()

    def _read(self) -> None:
        try:
            while True:
                try:
                    msg = m.decode(self.conn.recv())
                except channel.MalformedFrame as e:
                    log.warning("refused a message from the driver: %s", e)
                    continue
                finally:
                    self.heard = time.monotonic()
                if isinstance(msg, m.Ping):
                    self.conn.send(m.encode(m.Pong(msg.seq)))
                else:
                    self._queue.put(msg)
        except (OSError, ConnectionError, ChannelError) as e:
            log.debug("the connection to the driver ended: %s", e)
        finally:
            self._queue.put(None)


def _report_leftovers(run_id: str, conn: channel.Connection, address: str, started: threading.Event,
                      stall_secs: float = 2.0) -> None:
    """Tell the driver about processes of earlier runs (and foreign GPU holders) on this host.

    The scan costs a few hundred milliseconds of CPU, so it waits until the child was told to go,
    or until the reservation has stalled for ``stall_secs`` (when its findings matter most), to
    stay off the launch's critical path."""
    from dataclasses import asdict

    from .orphans import scan_host

    started.wait(stall_secs)
    try:
        found = tuple(asdict(x) for x in scan_host(exclude_runs={run_id}, address=address))
    except Exception:  # diagnostics must never break the node
        log.warning("the scan for leftover processes failed", exc_info=True)
        return
    if found and not conn.closed:
        try:
            conn.send(m.encode(m.Leftovers(found)))
        except OSError as e:  # the node ended (and closed its connection) while the scan ran
            log.debug("leftovers not reported: %s", e)


def _read_result(path: str):
    import pickle

    try:
        with open(path, "rb") as f:
            return pickle.load(f)  # written by our own child process on this machine, never from the network
    except (OSError, EOFError, pickle.UnpicklingError):
        return None
