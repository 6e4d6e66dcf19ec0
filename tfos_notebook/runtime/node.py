"""The node: what runs inside each barrier task on an executor.

register with the driver (holding a TensorFlow port open) -> receive the cluster spec -> set
TF_CONFIG / CUDA_VISIBLE_DEVICES -> run the user's function in a child process in its own process
group -> stream its output and progress to the driver -> report the outcome. The child is killed
with its whole group when the driver says stop, when the task ends for any reason, and (by the
child's own watchdog) when this process dies.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

from . import channel
from .ctx import FOREGROUND_ROLES, NodeContext, tf_config

PID_DIR_NAME = "tfos_notebook-pids"
MAX_RESULT_BYTES = 32 << 20
LOG_FLUSH_SECONDS = 0.2


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
    log_dir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    legacy_keras: bool | None = None
    attempt: int = 0
    stop_grace_secs: float = 5.0
    feed_buffer_bytes: int = 0  # > 0: InputMode.SPARK, chief and workers serve a data feed this big

    def __call__(self, iterator):  # the barrier mapPartitions function
        from pyspark import BarrierTaskContext

        task = BarrierTaskContext.get()
        gpus = list(task.resources()["gpu"].addresses) if "gpu" in task.resources() else []
        yield run_node(self, task.partitionId(), gpus)


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


def pid_dir() -> str:
    """Where nodes on this machine record the process groups they started (for orphan cleanup)."""
    path = os.path.join(tempfile.gettempdir(), PID_DIR_NAME)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def _kill_group(proc: subprocess.Popen, grace: float) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


class _Forwarder:
    """Batches output lines and progress messages from the child to the driver."""

    def __init__(self, conn: channel.Connection) -> None:
        self.conn = conn
        self.q: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True, name="tfos-forward")
        self.thread.start()

    def put(self, item: tuple) -> None:
        self.q.put(item)

    def _run(self) -> None:
        done = False
        while not done:
            lines, steps = [], []
            deadline = time.monotonic() + LOG_FLUSH_SECONDS
            while time.monotonic() < deadline and len(lines) < 500:
                try:
                    item = self.q.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    done = True
                    break
                if item[0] == "step":
                    steps.append(item[1])
                else:
                    lines.append(list(item))
            try:
                if lines:
                    self.conn.send({"type": "logs", "lines": lines})
                for step in steps:
                    self.conn.send(step)
            except OSError:
                return

    def close(self) -> None:
        self.q.put(None)
        self.thread.join(timeout=5)


def _pump_lines(stream, name: str, fwd: _Forwarder) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip("\n")
        fwd.put((name, line))
    stream.close()


def _pump_status(stream, fwd: _Forwarder) -> None:
    for raw in iter(stream.readline, b""):
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        if isinstance(msg, dict) and msg.get("type") in ("step", "feed"):
            fwd.put(("step", msg))
    stream.close()


def _child_env(plan: NodePlan, spec: dict[str, list[str]], role: str, index: int, gpus: list[str]) -> dict:
    env = dict(os.environ)
    env.update(plan.env)
    env["TF_CONFIG"] = tf_config(spec, role, index)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    env["PYTHONUNBUFFERED"] = "1"
    legacy = plan.legacy_keras
    if legacy is None:
        legacy = importlib.util.find_spec("tf_keras") is not None
    if legacy:
        env.setdefault("TF_USE_LEGACY_KERAS", "1")
    # The child must import this package the same way the Python worker did.
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    return env


def run_node(plan: NodePlan, task: int, gpus: list[str]) -> dict:
    """Run one node of the cluster; returns a small summary for Spark to collect. The outcome that
    matters travels to the driver over the control channel."""
    role, index = plan.roles[task]
    conn = channel.connect(plan.server_host, plan.server_port, plan.secret)
    host = conn.sock.getsockname()[0]  # the address on which this executor reaches the driver
    reservation = socket.socket()
    reservation.bind((host, 0))
    port = reservation.getsockname()[1]
    conn.send({"type": "register", "task": task, "attempt": plan.attempt, "host": host, "port": port,
               "pid": os.getpid(), "gpus": gpus, "executor_id": spark_executor_id()})
    reply = conn.recv()
    if reply.get("type") != "cluster":
        reservation.close()
        conn.close()
        return {"task": task, "outcome": "stopped"}
    spec = reply["cluster_spec"]
    workdir = tempfile.mkdtemp(prefix=f"tfos-{plan.run_id}-{task}-")
    payload, result_path = os.path.join(workdir, "payload.pkl"), os.path.join(workdir, "result.pkl")
    from pyspark import cloudpickle

    ctx = NodeContext(run_id=plan.run_id, executor_id=task, job_name=role, task_index=index, cluster_spec=spec,
                      defaultFS=plan.default_fs, working_dir=plan.working_dir, host=host,
                      spark_executor_id=spark_executor_id(), gpus=gpus, model_dir=plan.model_dir,
                      log_dir=plan.log_dir, attempt=plan.attempt)
    feed = None
    if plan.feed_buffer_bytes and role in FOREGROUND_ROLES:
        from .feed_server import FeedServer

        feed = FeedServer(plan.secret, host, plan.feed_buffer_bytes)
    with open(payload, "wb") as f:
        cloudpickle.dump({"main_fun": plan.main_fun, "args": plan.args, "ctx": ctx, "feed": feed}, f)
    status_r, status_w = os.pipe()
    reservation.close()  # release the port just before TensorFlow binds it
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfos_notebook.runtime.child", payload, result_path, str(status_w), str(os.getpid())],
        env=_child_env(plan, spec, role, index, gpus), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, pass_fds=(status_w,), start_new_session=True, cwd=workdir,
    )
    os.close(status_w)
    pid_file = os.path.join(pid_dir(), f"{plan.run_id}-{task}.json")
    with open(pid_file, "w") as f:
        json.dump({"run_id": plan.run_id, "task": task, "role": f"{role}:{index}", "pid": proc.pid,
                   "pgid": proc.pid, "node_pid": os.getpid(), "started": time.time()}, f)
    conn.send({"type": "state", "state": "running", "child_pid": proc.pid})
    fwd = _Forwarder(conn)
    pumps = [threading.Thread(target=_pump_lines, args=(proc.stdout, "stdout", fwd), daemon=True),
             threading.Thread(target=_pump_lines, args=(proc.stderr, "stderr", fwd), daemon=True),
             threading.Thread(target=_pump_status, args=(os.fdopen(status_r, "rb"), fwd), daemon=True)]
    for t in pumps:
        t.start()
    stopped = threading.Event()

    def listen() -> None:  # the driver may tell this node to stop at any time
        try:
            while True:
                if conn.recv().get("type") == "stop":
                    stopped.set()
                    _kill_group(proc, plan.stop_grace_secs)
                    return
        except (OSError, ConnectionError, channel.ChannelError):
            if proc.poll() is None:  # lost the driver: do not train on alone
                stopped.set()
                _kill_group(proc, plan.stop_grace_secs)

    threading.Thread(target=listen, daemon=True, name="tfos-listen").start()
    try:
        exit_code = proc.wait()
        for t in pumps:
            t.join(timeout=5)
        fwd.close()
        outcome = _read_result(result_path)
        if stopped.is_set():
            msg = {"type": "result", "ok": False, "stopped": True, "exit_code": exit_code}
        elif outcome and outcome[0] == "ok":
            value = outcome[1]
            if len(value) > MAX_RESULT_BYTES:
                msg = {"type": "result", "ok": False, "exit_code": exit_code,
                       "traceback": f"the function returned {len(value)} bytes; at most {MAX_RESULT_BYTES} "
                                    "can travel back to the driver: write large results to storage instead"}
            else:
                msg = {"type": "result", "ok": True, "value": value, "exit_code": exit_code}
        else:
            tb = outcome[1] if outcome else ""
            if not tb and exit_code < 0:
                tb = f"the process was killed by signal {signal.Signals(-exit_code).name}"
            msg = {"type": "result", "ok": False, "traceback": tb, "exit_code": exit_code}
        try:
            conn.send(msg)
        except OSError:
            pass
        return {"task": task, "outcome": "ok" if msg["ok"] else "error"}
    finally:
        _kill_group(proc, 0.5)
        try:
            os.remove(pid_file)
        except OSError:
            pass
        shutil.rmtree(workdir, ignore_errors=True)
        conn.close()


def _read_result(path: str):
    import pickle

    try:
        with open(path, "rb") as f:
            return pickle.load(f)  # written by our own child process on this machine, never from the network
    except (OSError, EOFError, pickle.UnpicklingError):
        return None
