"""Driver side of a run: pre-flight, control server, gang launch in barrier mode, reservations,
cluster spec, outcome.

``Run(sc, main_fun, args, num_nodes, ...).start()`` returns at once (after a sub-second
pre-flight) with the barrier job running on a background thread in a job group of its own; the
caller waits, polls the event stream, or stops it. Nothing here calls ``sc.stop()`` or
``sys.exit()``: every failure ends this run only, and the SparkContext stays usable.
"""

from __future__ import annotations

import logging
import os
import pickle
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from . import channel, preflight
from .child import WATCHDOG_SECS as CHILD_WATCHDOG_SECS
from .ctx import FOREGROUND_ROLES, node_dir_name
from .diagnose import Finding, Snapshot, blockers, diagnose, diagnose_failure, leftover_findings
from .errors import (
    ConfigError,
    NodeError,
    PreflightError,
    ReservationTimeout,
    RunStopped,
    SparkJobError,
)
from .events import (
    ClusterReady,
    EventStream,
    FindingRaised,
    GpuAssigned,
    LaunchSubmitted,
    Log,
    Registered,
    RunFinished,
    Step,
    TaskState,
)
from .filetail import Chunk
from .node import NodePlan
from .orphans import Leftover

log = logging.getLogger(__name__)

BACKGROUND_ROLES = ("ps", "evaluator")


FileSink = Callable[[str, list[Chunk]], dict[str, int]]


def plan_roles(num_nodes: int, num_ps: int = 0, master_node: str | None = "chief",
               eval_node: bool = False) -> list[tuple[str, int]]:
    """``(role, index)`` for each of ``num_nodes`` tasks, in the order ps, chief, evaluator, workers."""
    if num_nodes < 1:
        raise ConfigError(f"num_executors must be at least 1, got {num_nodes}")
    if num_ps < 0:
        raise ConfigError(f"num_ps must be 0 or more, got {num_ps}")
    if master_node not in (None, "chief", "master"):
        raise ConfigError(f"master_node must be 'chief', 'master' or None, got {master_node!r}")
    trainers = num_nodes - num_ps - (1 if eval_node else 0)
    if trainers < 1:
        raise ConfigError(
            f"{num_nodes} nodes leave no node to train after {num_ps} ps"
            f"{' and 1 evaluator' if eval_node else ''}: raise num_executors or lower num_ps"
        )
    roles = [("ps", i) for i in range(num_ps)]
    if master_node:
        roles.append((master_node, 0))
        trainers -= 1
    if eval_node:
        roles.append(("evaluator", 0))
    roles += [("worker", i) for i in range(trainers)]
    return roles


class _Node:
    """The driver's record of one task."""

    def __init__(self, task: int, role: str, index: int) -> None:
        self.task, self.role, self.index = task, role, index
        self.conn: channel.Connection | None = None
        self.host, self.port, self.executor_id = "", 0, ""
        self.state = "scheduled"
        self.returned = False
        self.value: Any = None

    @property
    def name(self) -> str:
        return f"{self.role}:{self.index}"


class Run:
    """One launch of ``main_fun`` on a gang of Spark barrier tasks.

    Args:
        sc: the SparkContext (the user's; never stopped here).
        main_fun: ``main_fun(args, ctx)``, run on every node in a child process.
        args: passed to ``main_fun`` unchanged (must pickle).
        num_nodes: barrier tasks, one per node, ps and evaluator included.
        num_ps: parameter servers; master_node: ``"chief"`` (default), ``"master"`` or None;
        eval_node: add one evaluator.
        log_dir: the run's log directory. A URI (``hdfs://``, ``dbfs:/``, ``s3a://``, ``file://``...)
            or ``/dbfs/`` path is shared storage: each node writes to ``<log_dir>/<role>_<index>``
            there. Any other path (or None: a temporary directory) is on each node's own disk, and
            the nodes ship what they write there to the driver (see ``set_file_sink``).
            ``ctx.log_dir`` is the node's own subdirectory.
        model_dir: handed to the nodes as ``ctx.model_dir``.
        reservation_timeout: seconds for every node to register before the run fails with findings.
        gpus_per_node: GPUs each node needs from Spark's task resources (0: CPU only, or whatever
            ``spark.task.resource.gpu.amount`` gives).
        env: extra environment variables for the nodes' processes.
        legacy_keras: set TF_USE_LEGACY_KERAS=1 on the nodes (None: when tf-keras is installed there).
        name: a label for views; defaults to the run id.
        preflight_wait: seconds to wait for executors that are still starting before diagnosing.
        retries: how many times a run whose node was lost (its process killed, its executor or
            Python worker gone) is relaunched; nodes resume from the latest checkpoint in
            ``model_dir`` through ``ctx.restore()`` or ``ctx.callbacks()``. An exception raised by
            the user's function is not retried: it would fail the same way again.
        input_mode: ``"tensorflow"`` (the function reads its own data) or ``"spark"``: each chief and
            worker serves a data feed that :meth:`train` and :meth:`inference` fill from Spark.
        feed_buffer_mb: with ``input_mode="spark"``, fed data a node holds before Spark has to wait.
    """

    def __init__(self, sc, main_fun, args: Any, num_nodes: int, *, num_ps: int = 0,
                 master_node: str | None = "chief", eval_node: bool = False, log_dir: str | None = None,
                 model_dir: str | None = None, reservation_timeout: float = 600.0, gpus_per_node: int = 0,
                 env: dict[str, str] | None = None, legacy_keras: bool | None = None, name: str | None = None,
                 preflight_wait: float = 30.0, stop_grace_secs: float = 5.0, retries: int = 2,
                 input_mode: str = "tensorflow", feed_buffer_mb: float = 64) -> None:
        if not callable(main_fun):
            raise ConfigError(f"main_fun must be a function taking (args, ctx), got {type(main_fun).__name__}")
        self.sc = sc
        self.main_fun, self.args = main_fun, args
        self.roles = plan_roles(num_nodes, num_ps, master_node, eval_node)
        if input_mode not in ("tensorflow", "spark"):
            raise ConfigError(f"input_mode must be 'tensorflow' or 'spark', got {input_mode!r}")
        self.input_mode = input_mode
        self.feed_buffer_bytes = int(feed_buffer_mb * (1 << 20)) if input_mode == "spark" else 0
        self.run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        self.name = name or self.run_id
        self.log_dir, self.model_dir = log_dir, model_dir
        self.reservation_timeout = reservation_timeout
        self.gpus_per_node = gpus_per_node
        self.env = dict(env or {})
        self.legacy_keras = legacy_keras
        self.preflight_wait = preflight_wait
        self.stop_grace_secs = stop_grace_secs
        self.background_grace_secs = 0.0
        self.events = EventStream()
        self.retries = retries
        self.attempt = 0
        self.job_group = f"tfos-{self.run_id}"
        self.cluster_spec: dict[str, list[str]] = {}
        self.error: BaseException | None = None
        self._nodes = [_Node(t, r, i) for t, (r, i) in enumerate(self.roles)]
        self._lock = threading.RLock()
        self._done = threading.Event()
        self._stop_requested = False
        self._foreground_done_at: float | None = None
        self._server: channel.ControlServer | None = None
        self._thread: threading.Thread | None = None
        self._leftovers: dict[tuple[str, int], Leftover] = {}
        self._versions: dict[str, tuple[str, str]] = {}
        self._seen_findings: set[tuple[str, str]] = set()
        self.stall_secs = 3.0  # no registration for this long -> diagnose and show findings
        self._file_sink: FileSink | None = None
        self._retry_pending = False
        self._state = "new"
        self.started_at: float | None = None
        self.feeder = None
        if input_mode == "spark":
            from .feed.feeder import Feeder

            self.feeder = Feeder(self)

    # -- views ---------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        """``new``, ``reserving``, ``running``, or a terminal state: ``finished``, ``failed``, ``stopped``."""
        return self._state

    @property
    def results(self) -> dict[str, Any]:
        """Return values of the nodes whose function returned, by ``role:index`` (a ps or evaluator
        stopped after the training nodes finished has none)."""
        return {n.name: n.value for n in self._nodes if n.returned}

    @property
    def result(self) -> Any:
        """The chief's return value (worker 0's when there is no chief)."""
        for n in self._nodes:
            if n.role in ("chief", "master"):
                return n.value
        return next((n.value for n in self._nodes if n.role == "worker" and n.index == 0), None)

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> Run:
        """Pre-flight, then submit the barrier job on a background thread and return."""
        self.started_at = time.monotonic()
        self._state = "reserving"
        names = tuple(f"{r}:{i}" for r, i in self.roles)
        findings = self._preflight(names)
        self._publish_findings(findings)
        if blockers(findings):
            error = PreflightError(f"cannot launch {len(self.roles)} nodes:", blockers(findings))
            self._finish("failed", error)
            raise error
        host = self.sc.getConf().get("spark.driver.host") or "127.0.0.1"
        self._secret = channel.new_secret()
        self._server = channel.ControlServer(host, self._secret, self._on_message, self._on_close)
        from pyspark import InheritableThread

        self._thread = InheritableThread(target=self._run_job, name=f"tfos-run-{self.run_id}", daemon=True)
        self._thread.start()
        return self

    def _preflight(self, names: tuple[str, ...]) -> list[Finding]:
        preflight.wait_for_executors(self.sc, len(self.roles), self.preflight_wait)
        snap = preflight.snapshot(self.sc, len(self.roles), names, self.gpus_per_node,
                                  time.monotonic() - self.started_at)
        return diagnose(snap)

    def _plan(self) -> NodePlan:
        hconf = self.sc._jsc.hadoopConfiguration()
        return NodePlan(
            run_id=self.run_id, server_host=self._server.host, server_port=self._server.port,
            secret=self._secret, main_fun=self.main_fun, args=self.args, roles=self.roles, attempt=self.attempt,
            default_fs=hconf.get("fs.defaultFS") or "file:///", working_dir=os.getcwd(),
            model_dir=self.model_dir, log_dir=self.log_dir, env=self.env, legacy_keras=self.legacy_keras,
            stop_grace_secs=self.stop_grace_secs, feed_buffer_bytes=self.feed_buffer_bytes,
        )

    def _run_job(self) -> None:
        """Run the barrier job, again for each retry, then settle the run's outcome."""
        n = len(self.roles)
        names = tuple(f"{r}:{i}" for r, i in self.roles)
        while True:
            attempt_started = time.monotonic()
            self.events.publish(LaunchSubmitted(self.run_id, num_tasks=n, roles=names, attempt=self.attempt))
            threading.Thread(target=self._watch_reservations, args=(attempt_started, self.attempt), daemon=True,
                             name=f"tfos-res-{self.run_id}-{self.attempt}").start()
            failure: BaseException | None = None
            try:
                self.sc.setJobGroup(self.job_group, f"tfos_notebook run {self.name} attempt {self.attempt}",
                                    interruptOnCancel=True)
                self.sc.parallelize(range(n), n).barrier().mapPartitions(self._plan()).collect()
            except BaseException as e:  # Py4JJavaError and friends: summarised below
                failure = e
            with self._lock:
                retry = self._retry_pending and not self._stop_requested
                previous = [nd.conn for nd in self._nodes if nd.conn is not None]
                if not retry:
                    self._settle(failure)
                    return
            self._wait_gone(previous)  # no process of the lost attempt may write beside the next one
            with self._lock:
                if self._stop_requested:
                    self._settle(failure)
                    return
                self._next_attempt()

    def _wait_gone(self, conns: list[channel.Connection]) -> None:
        """Wait until the nodes behind ``conns`` are gone (their connections closed), then for their
        child processes, which kill themselves within ``CHILD_WATCHDOG_SECS`` of their node's end.
        Nodes of the next attempt on the same host also kill what is left (``orphans.kill_attempts_before``)."""
        deadline = time.monotonic() + self.stop_grace_secs + 5.0
        while time.monotonic() < deadline and not all(c.attrs.get("gone") for c in conns):
            time.sleep(0.05)
        time.sleep(2 * CHILD_WATCHDOG_SECS)

    def _next_attempt(self) -> None:
        """Forget the lost attempt's nodes; the next barrier job starts them all afresh."""
        self._retry_pending = False
        self.error = None
        self.attempt += 1
        self.job_group = f"tfos-{self.run_id}-a{self.attempt}"
        self.cluster_spec = {}
        self._foreground_done_at = None
        self._nodes = [_Node(t, r, i) for t, (r, i) in enumerate(self.roles)]
        self._state = "reserving"

    def _settle(self, failure: BaseException | None) -> None:
        if self._stop_requested:
            self._finish("stopped", RunStopped(f"run {self.name} was stopped"))
        elif self.error is not None:
            self._finish("failed", self.error)
        elif failure is not None:
            findings = []
            try:
                findings = blockers(diagnose(self._live_snapshot(0.0)))
            except Exception:  # diagnosis is best effort; the Spark error is the fact
                log.debug("diagnosis after a failed job failed", exc_info=True)
            self._publish_findings(findings)
            self._finish("failed", SparkJobError(f"the Spark job of run {self.name} failed: "
                                                 f"{_spark_error_summary(failure)}", findings))
        else:
            missing = [nd.name for nd in self._nodes if nd.state != "finished"]
            if missing:
                self._finish("failed", SparkJobError(f"nodes {missing} ended without reporting a result"))
            else:
                self._finish("finished")

    def _publish_findings(self, findings: list[Finding]) -> None:
        for f in findings:
            key = (f.code, f.cause)
            if key not in self._seen_findings:
                self._seen_findings.add(key)
                self.events.publish(FindingRaised(self.run_id, finding=f))

    def _live_snapshot(self, stalled_for: float) -> Snapshot:
        import platform

        from .node import installed_versions

        names = tuple(f"{r}:{i}" for r, i in self.roles)
        with self._lock:
            registered = tuple(nd.name for nd in self._nodes if nd.conn is not None)
            versions = tuple((name, py, tf) for name, (py, tf) in self._versions.items())
            leftovers = tuple(self._leftovers.values())
        return preflight.snapshot(
            self.sc, len(self.roles), names, self.gpus_per_node, time.monotonic() - self.started_at,
            own_group=self.job_group, registered=registered, stalled_for=stalled_for, leftovers=leftovers, versions=versions,
            task_errors=preflight.task_errors(self.sc, self.job_group),
            driver_versions=(platform.python_version(), installed_versions()["tensorflow"]),
        )

    def diagnose(self) -> list[Finding]:
        """Findings about this run and the cluster now (for ``%tfos_diagnose``): what was raised so
        far and a fresh diagnosis."""
        raised = [e.finding for e in self.events.events(FindingRaised)]
        fresh = diagnose(self._live_snapshot(0.0)) if self.started_at else []
        seen = {(f.code, f.cause) for f in raised}
        return raised + [f for f in fresh if (f.code, f.cause) not in seen]

    def _watch_reservations(self, started: float, attempt: int) -> None:
        """While nodes register: when registrations stop for ``stall_secs``, diagnose and publish the
        findings (again each time something new turns up); at ``reservation_timeout``, fail."""
        deadline = started + self.reservation_timeout
        last_count, last_change = 0, time.monotonic()
        while not self._done.is_set() and not self.cluster_spec and attempt == self.attempt:
            now = time.monotonic()
            if now >= deadline:
                break
            count = sum(nd.conn is not None for nd in self._nodes)
            if count != last_count:
                last_count, last_change = count, now
            elif now - last_change >= self.stall_secs:
                try:
                    self._publish_findings(diagnose(self._live_snapshot(now - last_change)))
                except Exception:  # the JVM may be busy or gone; diagnosis is best effort
                    log.debug("live diagnosis failed", exc_info=True)
            time.sleep(min(0.25, max(0.0, deadline - now)))
        if self._done.is_set() or self.cluster_spec or attempt != self.attempt:
            return
        with self._lock:
            registered = [nd.name for nd in self._nodes if nd.conn is not None]
            missing = [nd.name for nd in self._nodes if nd.conn is None]
        try:
            findings = diagnose(self._live_snapshot(time.monotonic() - last_change))
        except Exception:
            findings = []
        findings = blockers(findings) or findings or [Finding(
            "reservation_timeout",
            f"{len(missing)} of {len(self.roles)} nodes did not register within {self.reservation_timeout:.0f}s",
            (f"registered: {registered}", f"missing: {missing}"),
            "check the executors' stderr for errors, or raise reservation_timeout",
        )]
        self._publish_findings(findings)
        self._abort(ReservationTimeout(f"run {self.name}: waited {self.reservation_timeout:.0f}s for "
                                       f"{len(self.roles)} reservations, got {len(registered)}", findings))

    # -- control channel -----------------------------------------------------------------------
    def _on_message(self, conn: channel.Connection, msg: dict) -> None:
        kind = msg.get("type")
        if kind == "register":
            self._on_register(conn, msg)
            return
        node: _Node | None = conn.attrs.get("node")
        if node is None:
            raise channel.ChannelError(f"message {kind!r} before registration")
        if self._stale(node):
            return  # a node of an earlier attempt, still winding down
        if kind == "logs":
            for stream, line in msg.get("lines", []):
                self.events.publish(Log(self.run_id, task=node.task, role=node.role, index=node.index,
                                        stream=str(stream), line=str(line)))
        elif kind == "step":
            self.events.publish(Step(self.run_id, task=node.task, role=node.role, index=node.index,
                                     step=int(msg.get("step", 0)), metrics=dict(msg.get("metrics", {}))))
        elif kind == "state":
            self._set_state(node, str(msg.get("state")))
        elif kind == "result":
            self._on_result(node, msg)
        elif kind == "leftovers":
            self._on_leftovers(msg.get("items", []))
        elif kind == "files":
            self._on_files(conn, node, msg)
        elif kind == "feed" and self.feeder is not None:
            self.feeder.on_message(node, msg)
        else:
            raise channel.ChannelError(f"unknown message type {kind!r}")

    @property
    def file_sink(self) -> FileSink | None:
        """The current receiver of shipped event-file bytes (see ``set_file_sink``)."""
        return self._file_sink

    def set_file_sink(self, sink: FileSink | None) -> None:
        """Receive the event-file bytes that nodes ship from node-local log directories.

        ``sink(node_dir, chunks)`` is called on a connection thread with the node's subdirectory
        name (``chief_0``...) and a list of ``Chunk(relpath, offset, data)``; it returns
        ``{relpath: offset}`` for files whose bytes before ``offset`` it lacks, which that node then
        sends again. Setting a sink mid-run asks every node to resend its files from the start (a
        sink keeps only the bytes it lacks). Without a sink, shipped bytes are dropped.
        """
        with self._lock:
            self._file_sink = sink
            if sink is not None:
                for nd in self._nodes:
                    if nd.conn is not None:
                        _send_quietly(nd.conn, {"type": "files_resend"})

    def _on_files(self, conn: channel.Connection, node: _Node, msg: dict) -> None:
        sink = self._file_sink
        if sink is None:
            return
        try:
            chunks = [Chunk(str(rel), int(off), bytes(data)) for rel, off, data in msg.get("chunks", [])]
        except (TypeError, ValueError) as e:
            raise channel.ChannelError(f"malformed files message: {e}") from e
        try:
            gaps = sink(node_dir_name(node.role, node.index), chunks)
        except Exception:  # a failing sink loses TensorBoard bytes, never the run
            log.exception("run %s: the event-file sink failed for %s", self.name, node.name)
            return
        if gaps:
            _send_quietly(conn, {"type": "files_rewind", "files": gaps})

    def _on_register(self, conn: channel.Connection, msg: dict) -> None:
        task = msg.get("task")
        with self._lock:
            if not isinstance(task, int) or not 0 <= task < len(self._nodes) or self._nodes[task].conn is not None:
                raise channel.ChannelError(f"bad or duplicate registration for task {task!r}")
            if msg.get("attempt") != self.attempt:
                raise channel.ChannelError(f"registration for attempt {msg.get('attempt')!r}, now {self.attempt}")
            node = self._nodes[task]
            node.conn, node.host, node.port = conn, str(msg["host"]), int(msg["port"])
            node.executor_id = str(msg.get("executor_id", ""))
            self._versions[node.name] = (str(msg.get("python", "")), str(msg.get("tensorflow", "")))
            conn.attrs["node"] = node
            node.state = "registered"
            gpus = tuple(str(g) for g in msg.get("gpus", []))
            self.events.publish(Registered(self.run_id, task=task, role=node.role, index=node.index, host=node.host,
                                           executor_id=node.executor_id, port=node.port,
                                           pid=int(msg.get("pid", 0)), gpus=gpus))
            if gpus:
                self.events.publish(GpuAssigned(self.run_id, task=task, role=node.role, index=node.index,
                                                host=node.host, addresses=gpus))
            if all(nd.conn is not None for nd in self._nodes) and not self._done.is_set():
                spec: dict[str, list[str]] = {}
                for nd in self._nodes:
                    spec.setdefault(nd.role, []).append(f"{nd.host}:{nd.port}")
                self.cluster_spec = spec
                for nd in self._nodes:
                    nd.conn.send({"type": "cluster", "cluster_spec": spec})
                self._state = "running"
                self.events.publish(ClusterReady(self.run_id, cluster_spec=spec))

    def _on_leftovers(self, items: list) -> None:
        found = []
        with self._lock:
            for item in items:
                x = Leftover(**{**item, "gpus": tuple(item.get("gpus", ()))})
                if (x.host, x.pid) not in self._leftovers:
                    self._leftovers[(x.host, x.pid)] = x
                    found.append(x)
        if found:
            self._publish_findings(leftover_findings(tuple(found), self.gpus_per_node))

    def _set_state(self, node: _Node, state: str, detail: str = "") -> None:
        node.state = state
        self.events.publish(TaskState(self.run_id, task=node.task, role=node.role, index=node.index,
                                      state=state, detail=detail))

    def _on_result(self, node: _Node, msg: dict) -> None:
        with self._lock:
            if msg.get("ok"):
                node.value = pickle.loads(msg["value"])  # authenticated channel, from our own node
                node.returned = True
                self._set_state(node, "finished")
            elif msg.get("stopped"):
                bg_done = node.role in BACKGROUND_ROLES and self._foreground_done_at is not None
                self._set_state(node, "finished" if bg_done else "stopped",
                                "stopped after the training nodes finished" if bg_done else "")
                return
            else:
                code = msg.get("exit_code")
                self._set_state(node, "failed", f"exit code {code}")
                tb = str(msg.get("traceback", ""))
                findings = diagnose_failure(node.role, node.index, node.host, tb, node.port)
                self._publish_findings(findings)
                killed = isinstance(code, int) and code < 0  # a signal, not an exception of the function
                self._abort(NodeError(node.role, node.index, node.host, tb, code, findings), retryable=killed)
                return
            foreground = [nd for nd in self._nodes if nd.role in FOREGROUND_ROLES]
            if self._foreground_done_at is None and all(nd.state == "finished" for nd in foreground):
                self._foreground_done_at = time.monotonic()
                threading.Thread(target=self._stop_background, daemon=True).start()

    def _stop_background(self) -> None:
        deadline = self._foreground_done_at + self.background_grace_secs
        while time.monotonic() < deadline and not self._done.is_set():
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        with self._lock:
            for nd in self._nodes:
                if nd.role in BACKGROUND_ROLES and nd.state in ("registered", "running") and nd.conn:
                    _send_quietly(nd.conn, {"type": "stop"})

    def _stale(self, node: _Node) -> bool:
        return self._nodes[node.task] is not node

    def _on_close(self, conn: channel.Connection) -> None:
        conn.attrs["gone"] = True
        node: _Node | None = conn.attrs.get("node")
        with self._lock:
            if (node is None or self._stale(node) or self._done.is_set() or self._stop_requested
                    or self.error is not None or self._retry_pending):
                return
            if node.state in ("registered", "running"):
                self._set_state(node, "failed", "connection lost")
                self._abort(NodeError(node.role, node.index, node.host,
                                      "the node's connection closed before it reported a result: its executor "
                                      "or Python worker died (see the executor's stderr in the Spark UI)"),
                            retryable=True)

    # -- ending --------------------------------------------------------------------------------
    def _abort(self, error: BaseException, retryable: bool = False) -> None:
        """End this attempt: tell every node to stop and cancel the attempt's job group if it
        lingers. A lost node (``retryable``) with retries left starts another attempt; anything
        else fails the run with ``error``."""
        with self._lock:
            if self._retry_pending or self.error is not None:
                return
            if retryable and self.attempt < self.retries and not self._stop_requested:
                self._retry_pending = True
                self._publish_findings([Finding(
                    "node_lost_retrying",
                    f"a node was lost; relaunching the run (attempt {self.attempt + 2} of {self.retries + 1})",
                    (str(error).splitlines()[0],),
                    "nothing to do if the nodes resume from their checkpoints (ctx.restore() or ctx.callbacks()); "
                    "otherwise training restarts from scratch",
                    "warning",
                )])
            else:
                if retryable and self.retries:
                    error = NodeError(error.role, error.index, error.host,
                                      f"{error.traceback_text}\n(after {self.attempt + 1} attempts; retries={self.retries})",
                                      error.exit_code, error.findings)
                self.error = error
            for nd in self._nodes:
                if nd.conn is not None:
                    _send_quietly(nd.conn, {"type": "stop"})
            group = self.job_group
        threading.Thread(target=self._cancel_after_grace, args=(group,), daemon=True).start()

    def _cancel_after_grace(self, group: str) -> None:
        deadline = time.monotonic() + self.stop_grace_secs + 2.0
        while time.monotonic() < deadline:
            if group != self.job_group or self._done.is_set():
                return  # that attempt's job already ended
            time.sleep(0.1)
        if group == self.job_group and not self._done.is_set():
            self.sc.cancelJobGroup(group)

    def _thread_done(self, timeout: float) -> bool:
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _finish(self, state: str, error: BaseException | None = None) -> None:
        if self._done.is_set():
            return
        if error is not None and self.error is None:
            self.error = error
        if self._server is not None:
            self._server.close()
        self._state = state
        self.events.publish(RunFinished(self.run_id, state=state, error=str(error) if error else ""))
        self._done.set()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the run: nodes kill their processes, the job group is cancelled. Returns when done."""
        with self._lock:
            if self._done.is_set():
                return
            self._stop_requested = True
            for nd in self._nodes:
                if nd.conn is not None:
                    _send_quietly(nd.conn, {"type": "stop"})
        if not self._thread_done(self.stop_grace_secs + 2.0):
            self.sc.cancelJobGroup(self.job_group)
        if not self._done.wait(timeout):
            raise TimeoutError(f"run {self.name} did not stop within {timeout:.0f}s")

    # -- InputMode.SPARK -----------------------------------------------------------------------------
    def _feeder(self):
        if self.feeder is None:
            raise ConfigError(f"run {self.name} was started with input_mode={self.input_mode!r}; feeding Spark "
                              "data needs Run(..., input_mode='spark') (TFCluster.run(..., input_mode=InputMode.SPARK))")
        return self.feeder

    def train(self, data: Any, num_epochs: int = 1, feed_timeout: float = 600.0, end_feed: bool = True):
        """Feed a Spark DataFrame or RDD to the training nodes ``num_epochs`` times; returns a
        ``FeedSummary`` once every row of every epoch is with the nodes.

        Partitions go round-robin to the chief and workers over the network (no task needs to run
        where its node runs, but the cluster needs a free task slot beside the nodes). Each pass
        over ``ctx.dataset`` on a node is one epoch. The nodes' ``terminate()`` (or their function
        returning) ends feeding early without error.

        Args:
            data: a DataFrame (fed as Arrow batches) or an RDD (rows of tuples, Rows, dicts,
                numbers, strings or numpy arrays; the first row fixes the types).
            num_epochs: passes over ``data``; each runs one Spark job, so cache ``data`` if it is
                costly to compute.
            feed_timeout: seconds a node may leave fed data untouched before this fails.
            end_feed: after the last epoch, tell the nodes no more data will come
                (``DataFeed.should_stop()``); pass False to call ``train`` again.

        Raises:
            FeedTimeout: a node took no data for ``feed_timeout`` seconds.
            NodeError: a node failed while being fed (its traceback).
            FeedError: the data cannot be fed (no free slot, bad types...), with the fix.
        """
        return self._feeder().train(data, num_epochs, feed_timeout, end_feed)

    def inference(self, data: Any, feed_timeout: float = 600.0, schema: Any = None, keep: list[str] | None = None):
        """Predictions of the nodes for every row of ``data``, computed lazily by Spark.

        For an RDD, an RDD with one prediction per row, in order. For a DataFrame, a DataFrame
        of the ``keep`` columns (default: all) of each row next to its prediction columns; their
        types come from ``schema`` (DDL string or StructType) or, when omitted, from the nodes'
        answer for the first row (which they then see twice). The nodes answer with
        ``ctx.predict(fn)`` or ``DataFeed(ctx.mgr, train_mode=False)``; rows and answers travel on
        one connection, so each row gets exactly its own prediction. Call before the feed ends.
        """
        return self._feeder().inference(data, feed_timeout, schema, keep)

    def end_feed(self, timeout: float = 600.0) -> None:
        """Tell the nodes that no more data will come (``DataFeed.should_stop()`` turns true)."""
        self._feeder().end_feed(timeout)

    def wait_for_reservations(self, timeout: float | None = None) -> dict[str, list[str]]:
        """Block until every node registered; returns the cluster spec or raises the run's error."""
        self.events.wait_for(lambda evs: any(isinstance(e, (ClusterReady, RunFinished)) for e in evs), timeout)
        if self.error is not None and not self.cluster_spec:
            raise self.error
        if not self.cluster_spec:
            raise TimeoutError(f"run {self.name}: not every node registered within {timeout}s")
        return self.cluster_spec

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the run ends; returns the chief's value, or raises the run's error
        (``NodeError`` with the node's traceback, ``ReservationTimeout``, ``RunStopped``...)."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"run {self.name} still {self.state} after {timeout}s")
        if self.error is not None:
            raise self.error
        return self.result

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def node_states(self) -> dict[str, str]:
        return {nd.name: nd.state for nd in self._nodes}


def _send_quietly(conn: channel.Connection, msg: dict) -> None:
    try:
        conn.send(msg)
    except OSError:
        pass


def _spark_error_summary(e: BaseException) -> str:
    text = str(e)
    for line in text.splitlines():
        line = line.strip()
        if "Exception:" in line or "Error:" in line:
            return line[:2000]
    return text[:2000]

