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
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict
from urllib.parse import parse_qs, urlparse

from ...host.fuse import FuseError, fuse_path
from ...host.gpus import visible_devices
from ...host.orphans import kill_attempts_before, pid_dir
from ...host.paths import is_shared_logdir, local_path, node_dir_name, work_prefix
from ...host.procs import dump_stacks, kill_process_group
from ...host.versions import installed_versions, keras_in_use, uses_legacy_keras
from ...wire import channel
from ...wire import messages as m
from ...wire.plan import NodePlan, node_name
from ..child import taskcontext
from ..child.ctx import NodeContext
from ..child.export import DEFAULT_FS_ENV, WORKING_DIR_ENV
from .feed.localfeed import LocalFeed
from .gpusampler import GpuSampler, SystemSampler
from .logship import LogShipper
from .memguard import MemoryGuard, memory_stop, node_cap
from .nodelink import Orders, read_result, report_leftovers, result_message
from .nodeproc import ChildOrders, ChildOutput, hand_over_port, serve_feed, start_child

log = logging.getLogger(__name__)


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


#: Where Linux says which ports it hands out to outgoing connections.
EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
RESERVE_TRIES = 64


def reserve_port(host: str, ranges: str = EPHEMERAL_RANGE) -> socket.socket:
    """A socket bound to a free port of ``host`` for TensorFlow, outside the ports the system hands
    to outgoing connections where it says which those are. The node holds the port until just
    before TensorFlow binds it; a port of the ephemeral range, free again in that moment, could be
    taken as the local port of any process's outgoing connection on the host, and TensorFlow's
    server would fail with "Could not start gRPC server" (seen on a busy two-host run). Elsewhere,
    or when no port outside the range is free after a few tries, any free port."""
    sock = socket.socket()
    try:
        with open(ranges) as f:
            low, high = (int(x) for x in f.read().split()[:2])
    except (OSError, ValueError):
        low = high = 0
    candidates = [*range(10000, low), *range(high + 1, 65536)] if low > 10000 or high < 65535 else []
    for port in random.sample(candidates, min(RESERVE_TRIES, len(candidates))):
        try:
            sock.bind((host, port))
            return sock
        except OSError:  # taken: try another
            continue
    sock.bind((host, 0))
    return sock


def sees_probe(probe: str | None) -> bool:
    """Whether the driver's probe file in a local model dir is visible here (True when nothing is
    probed): the model dir is shared only if every node sees it (see driver/run/storage.py)."""
    return probe is None or os.path.exists(probe)


def node_log_dir(plan: NodePlan, role: str, index: int, workdir: str) -> tuple[str, bool]:
    """This node's log directory, and whether its new bytes must be shipped to the driver.

    A shared log directory (a URI other than ``file://``, or a path under Databricks' ``/Volumes``
    or ``/dbfs`` mounts; ``dbfs:/`` URIs through those mounts, see ``fuse.fuse_path``) is written
    directly, one subdirectory per node. Otherwise the node writes on its own disk (under the given
    path, which the driver made absolute, or a temporary one when the run has no log_dir) and ships
    what it writes.

    Raises:
        FuseError: the log directory needs a Databricks mount that this host lacks.
    """
    name = node_dir_name(role, index)
    if is_shared_logdir(plan.log_dir):
        return f"{fuse_path(plan.log_dir).rstrip('/')}/{name}", False
    local = local_path(plan.log_dir)
    path = os.path.join(local or os.path.join(workdir, "logs"), name)
    os.makedirs(path, exist_ok=True)
    return path, True


def run_node(plan: NodePlan, task: int, gpus: list[str]) -> dict:
    """Run one node of the cluster; returns a small summary for Spark to collect. The outcome that
    matters travels to the driver over the control channel."""
    return run_started(start_node(plan, task, gpus))


def start_node(plan: NodePlan, task: int, gpus: list[str], shared: tuple[str, ...] = ()) -> _Node:
    """The node, its process starting (forked, where it may be, before this task starts a thread:
    ``forked.py``) while the cluster reserves; ``shared``: see ``nodeproc.start_child``."""
    return _Node(plan, task, gpus, shared)


def run_started(node: _Node, local_feed: LocalFeed | None = None) -> dict:
    """Run the node whose process ``start_node`` started (see ``run_node``)."""
    plan, task = node.plan, node.task
    try:
        node.register(local_feed)
        reply = node.orders.next()
        if reply is None:
            raise ConnectionError("the connection to the driver closed before every node registered")
        if not isinstance(reply, m.Cluster):
            return {"task": task, "outcome": "stopped"}
        try:  # TensorFlow opens dbfs:/ through Databricks' mounts, which this host may lack
            log_dir, ship_logs = node_log_dir(plan, node.role, node.index, node.workdir)
            model_dir = fuse_path(plan.model_dir) if plan.model_dir else None
        except FuseError as e:  # the run fails with the reason, not retried: another host would lack it too
            node.conn.send(m.encode(m.Result(ok=False, traceback=f"{type(e).__name__}: {e}")))
            return {"task": task, "outcome": "error"}
        node.start_function(reply, log_dir, model_dir)
        guard = MemoryGuard(node.conn, node.proc, *node_cap(plan.memory_limit_mb))
        samplers = [guard.start(), GpuSampler(node.conn, node.devices).start(),
                    *([SystemSampler(node.conn).start()] if plan.mlflow else [])]
        try:
            return _supervise(plan, task, node.proc, node.output, node.child_orders, node.result_path, node.orders,
                              log_dir if ship_logs else None, os.path.join(node.workdir, "profile"),
                              node.reporter, node.ended, guard)
        finally:
            for sampler in samplers:
                sampler.stop()
    finally:
        node.close()


class _Node:
    """One node's process and what it holds, in the order ``run_node`` takes them: the child (at
    once), the connection and the reserved port (``register``), the function's start
    (``start_function``); ``close`` lets go of all of it, whatever was reached."""

    def __init__(self, plan: NodePlan, task: int, gpus: list[str], shared: tuple[str, ...] = ()) -> None:
        self.plan, self.task = plan, task
        self.role, self.index = plan.roles[task]
        if plan.attempt:  # a relaunch: what the lost attempt left on this host must not write beside us
            kill_attempts_before(plan.run_id, plan.attempt)
        self.gpus = gpus[: plan.gpu_counts[task]] if plan.gpu_counts else gpus
        # the devices the node's process sees: Spark's addresses, or what they index in an inherited list
        self.devices = visible_devices(self.gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
        self.workdir = tempfile.mkdtemp(prefix=work_prefix(plan.run_id, task))
        self.result_path = os.path.join(self.workdir, "result.pkl")
        self.pid_file = os.path.join(pid_dir(), f"{plan.run_id}-{task}.json")
        self._record()  # first: a leftover scan (another run's cleanup) must never find the child unrecorded
        try:
            child = start_child(plan, task, self.devices, self.workdir, shared)
        except BaseException:
            self._forget()
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise
        self.proc, self.status_r, self.handoff, self.child_orders = child.proc, child.status_r, child.handoff, child.orders
        self.how_started = child.how
        self._record(pid=self.proc.pid, pgid=self.proc.pid)
        self.conn: channel.Connection | None = None
        self.orders: Orders | None = None
        self.output: ChildOutput | None = None
        self.reservation: socket.socket | None = None
        self.started, self.ended = threading.Event(), threading.Event()  # the child was told to go; it ended
        self.registered = threading.Event()

    def _record(self, **child: int) -> None:
        """This node's record under ``pid_dir()`` (its run is live while this process is:
        ``host/orphans.py``), with its child's pid once there is one; replaced whole, so that a scan
        never reads half of it."""
        record = {"run_id": self.plan.run_id, "task": self.task, "role": node_name(self.role, self.index),
                  "node_pid": os.getpid(), "started": time.time(), **child}
        with open(self.pid_file + ".tmp", "w") as f:
            json.dump(record, f)
        os.replace(self.pid_file + ".tmp", self.pid_file)

    def _forget(self) -> None:
        try:
            os.remove(self.pid_file)
        except OSError as e:
            log.debug("could not remove the pid record %s: %s", self.pid_file, e)

    def register(self, local_feed: LocalFeed | None) -> None:
        """Connect to the driver, hold a port for TensorFlow and register with both; the child's
        output and the leftover report start flowing."""
        plan, task = self.plan, self.task
        self.conn = conn = channel.connect(plan.server_host, plan.server_port, plan.secret)
        self.host = conn.sock.getsockname()[0]  # the address on which this executor reaches the driver
        if plan.serves_feed(task):
            serve_feed(self.proc, plan.secret, self.host, plan.feed_buffer_bytes)
        self.reservation = reserve_port(self.host)
        conn.send(m.encode(m.Register(
            task=task, attempt=plan.attempt, host=self.host, port=self.reservation.getsockname()[1],
            pid=os.getpid(), gpus=tuple(self.devices), executor_id=spark_executor_id(),
            hostname=socket.gethostname(), sees_model_dir=sees_probe(plan.model_dir_probe), started=self.how_started,
            keras=keras_in_use(uses_legacy_keras(plan.legacy_keras, plan.env, os.environ)),
            **installed_versions())))
        self.output = ChildOutput(self.proc, self.status_r, conn, local_feed)
        self.reporter = threading.Thread(target=report_leftovers, daemon=True,
                                         args=(plan.run_id, conn, self.host, self.started, self.ended))
        self.reporter.start()
        self.orders = Orders(conn)
        self.registered.set()

    def start_function(self, cluster: m.Cluster, log_dir: str, model_dir: str | None) -> None:
        """Hand the child its function, arguments and ``ctx`` for ``cluster``, free the reserved
        port (or hand it over) just before TensorFlow binds it, and tell the child to go."""
        import cloudpickle

        plan, spec = self.plan, cluster.cluster_spec
        ctx = NodeContext(run_id=plan.run_id, executor_id=self.task, job_name=self.role, task_index=self.index,
                          cluster_spec=spec, defaultFS=plan.default_fs, working_dir=plan.working_dir,
                          host=self.host, spark_executor_id=spark_executor_id(), gpus=self.gpus,
                          model_dir=model_dir, log_dir=log_dir, attempt=plan.attempt,
                          model_dir_shared=cluster.model_dir_shared)
        payload = os.path.join(self.workdir, "payload.pkl")
        with open(payload, "wb") as f:
            cloudpickle.dump({"main_fun": plan.main_fun, "args": plan.args, "ctx": ctx,
                              "task_context": taskcontext.capture()}, f)
        if self.handoff is not None:  # release_port=False: the function frees it (ctx.release_port())
            hand_over_port(self.handoff, self.reservation)
            self.handoff = None
        self.reservation.close()
        go = {"payload": payload, "result": self.result_path,
              "env": {"TF_CONFIG": tf_config(spec, self.role, self.index), DEFAULT_FS_ENV: plan.default_fs,
                      WORKING_DIR_ENV: plan.working_dir}}
        self.proc.stdin.write((json.dumps(go) + "\n").encode())
        self.proc.stdin.close()
        self.conn.send(m.encode(m.NodeStateReport("running", self.proc.pid)))
        self.started.set()

    def task_failed(self, traceback_text: str, wait: float) -> None:
        """This node's Spark task failed beside it (feeding it): tell the driver why, as the node's
        error, not a lost node to relaunch (it would fail the same way), and end its process. The
        node registers first when it is about to (``wait`` seconds at most)."""
        if self.registered.wait(wait):
            try:
                self.conn.send(m.encode(m.Result(ok=False, traceback=f"the node's Spark task failed beside it:\n"
                                                                      f"{traceback_text.rstrip()}")))
            except OSError as e:
                log.warning("could not report the task's failure to the driver: %s", e)
        kill_process_group(self.proc, 0.5)

    def close(self) -> None:
        """Kill the child's process group and let go of everything the node held."""
        kill_process_group(self.proc, 0.5)
        if self.reservation is not None:
            self.reservation.close()
        if self.output is not None:
            self.output.close()
        else:
            os.close(self.status_r)
        if self.handoff is not None:
            self.handoff.close()
        self.child_orders.close()
        self._forget()
        shutil.rmtree(self.workdir, ignore_errors=True)
        if self.conn is not None:
            self.conn.close()
        if self.orders is not None:
            self.orders.join()  # its threads end with the connection


def _supervise(plan: NodePlan, task: int, proc: subprocess.Popen, output: ChildOutput, child_orders: ChildOrders,
               result_path: str, orders: Orders, ship_dir: str | None, profile_dir: str,
               reporter: threading.Thread, ended: threading.Event, guard: MemoryGuard) -> dict:
    """Forward the child's output, progress, (from ``ship_dir``) event files and profiles, obey
    stop, profile and checkpoint orders, and report its outcome (setting ``ended`` once the child's process
    ended; out of memory where ``guard`` stopped it or the kernel's OOM killer ended it)."""
    conn = orders.conn
    os.makedirs(profile_dir, exist_ok=True)
    shipper = LogShipper(conn, {m.PROFILE_AREA: profile_dir, **({"": ship_dir} if ship_dir else {})}).start()
    output.shipper = shipper  # a profile's trace is shipped before the message that says it is there
    stopped = threading.Event()

    def listen() -> None:  # the driver may tell this node to stop at any time
        for msg in iter(orders.next, None):  # None: the connection is gone
            if isinstance(msg, m.Stop):
                stopped.set()
                if msg.stacks:
                    dump_stacks(proc)
                kill_process_group(proc, plan.stop_grace_secs)
                return
            if isinstance(msg, (m.FilesResend, m.FilesRewind)):
                shipper.on_message(msg)
            elif isinstance(msg, m.Profile):
                order = {"kind": "profile", "session": msg.session, "seconds": msg.seconds, "steps": msg.steps,
                         "dir": profile_dir}
                if not child_orders.send(order):
                    output.fwd.put(m.ProfileDone(msg.session, False, "the node's process has ended"))
            elif isinstance(msg, (m.SaveSoon, m.SaveAt, m.SaveGo)):  # the decommission checkpoint: savepoint.py
                child_orders.send({"kind": msg.TYPE, **asdict(msg)})
        if proc.poll() is None:  # lost the driver: do not train on alone
            stopped.set()
            kill_process_group(proc, plan.stop_grace_secs)

    def watch_driver() -> None:  # no word for DRIVER_SILENT_SECS: the driver (or our network) is gone
        while not ended.wait(1.0):
            if time.monotonic() - orders.heard > m.DRIVER_SILENT_SECS:
                log.warning("no word from the driver for %.0fs: ending the node's process", m.DRIVER_SILENT_SECS)
                conn.close()  # ends the reading thread, and so listen(), which kills the process group
                return

    orders.follow(listen, "tfos-listen")  # ends with the connection (joined by run_node) or on Stop
    watcher = threading.Thread(target=watch_driver, daemon=True, name="tfos-watch-driver")
    watcher.start()
    exit_code = proc.wait()
    ended.set()
    watcher.join()
    output.close()  # every output line reaches the driver before the result
    shipper.close()  # every event-file byte reaches the driver before the result
    msg = result_message(read_result(result_path), exit_code, stopped.is_set(), memory_stop(guard, exit_code))
    reporter.join(10)  # the leftover report goes out before the result closes the node's account
    try:
        conn.send(m.encode(msg))
    except OSError as e:
        log.warning("could not report the result to the driver: %s", e)
    return {"task": task, "outcome": "ok" if msg.ok else "error"}


def tf_config(cluster_spec: dict[str, list[str]], job_name: str, task_index: int) -> str:
    """The ``TF_CONFIG`` for one node. The evaluator is left out of the cluster, as TensorFlow's
    strategies expect; it learns its own role from ``task``."""
    cluster = {k: v for k, v in cluster_spec.items() if k != "evaluator" and v}
    return json.dumps({"cluster": cluster, "task": {"type": job_name, "index": task_index}})
