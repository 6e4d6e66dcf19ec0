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
from typing import Any

from . import channel, preflight
from .ctx import FOREGROUND_ROLES
from .diagnose import Finding, blockers, diagnose
from .errors import NodeError, PreflightError, ReservationTimeout, RunStopped, SparkJobError, TFOSError
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
from .node import NodePlan

log = logging.getLogger(__name__)

BACKGROUND_ROLES = ("ps", "evaluator")


class ConfigError(TFOSError, ValueError):
    """The launch was asked for something impossible (bad counts, unknown role)."""


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
        log_dir, model_dir: handed to the nodes as ``ctx.log_dir`` / ``ctx.model_dir``.
        reservation_timeout: seconds for every node to register before the run fails with findings.
        gpus_per_node: GPUs each node needs from Spark's task resources (0: CPU only, or whatever
            ``spark.task.resource.gpu.amount`` gives).
        env: extra environment variables for the nodes' processes.
        legacy_keras: set TF_USE_LEGACY_KERAS=1 on the nodes (None: when tf-keras is installed there).
        name: a label for views; defaults to the run id.
        preflight_wait: seconds to wait for executors that are still starting before diagnosing.
        input_mode: ``"tensorflow"`` (the function reads its own data) or ``"spark"``: each chief and
            worker serves a data feed that :meth:`train` and :meth:`inference` fill from Spark.
        feed_buffer_mb: with ``input_mode="spark"``, fed data a node holds before Spark has to wait.
    """

    def __init__(self, sc, main_fun, args: Any, num_nodes: int, *, num_ps: int = 0,
                 master_node: str | None = "chief", eval_node: bool = False, log_dir: str | None = None,
                 model_dir: str | None = None, reservation_timeout: float = 600.0, gpus_per_node: int = 0,
                 env: dict[str, str] | None = None, legacy_keras: bool | None = None, name: str | None = None,
                 preflight_wait: float = 30.0, stop_grace_secs: float = 5.0, input_mode: str = "tensorflow",
                 feed_buffer_mb: float = 64) -> None:
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
        self.started_at: float | None = None
        self.feeder = None
        if input_mode == "spark":
            from .feeder import Feeder

            self.feeder = Feeder(self)

    # -- views ---------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        """``reserving``, ``running``, or a terminal state: ``finished``, ``failed``, ``stopped``."""
        ended = self.events.events(RunFinished)
        if ended:
            return ended[-1].state
        if self.events.events(ClusterReady):
            return "running"
        return "reserving" if self.started_at else "new"

    @property
    def results(self) -> dict[str, Any]:
        """Return values of the nodes that finished, by ``role:index``."""
        return {n.name: n.value for n in self._nodes if n.state == "finished"}

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
        names = tuple(f"{r}:{i}" for r, i in self.roles)
        findings = self._preflight(names)
        for f in findings:
            self.events.publish(FindingRaised(self.run_id, finding=f))
        if blockers(findings):
            error = PreflightError(f"cannot launch {len(self.roles)} nodes:", blockers(findings))
            self._finish("failed", error)
            raise error
        host = self.sc.getConf().get("spark.driver.host") or "127.0.0.1"
        self._secret = channel.new_secret()
        self._server = channel.ControlServer(host, self._secret, self._on_message, self._on_close)
        self.events.publish(LaunchSubmitted(self.run_id, num_tasks=len(self.roles), roles=names))
        from pyspark import InheritableThread

        self._thread = InheritableThread(target=self._run_job, name=f"tfos-run-{self.run_id}", daemon=True)
        self._thread.start()
        threading.Thread(target=self._watch_reservations, daemon=True, name=f"tfos-res-{self.run_id}").start()
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
            secret=self._secret, main_fun=self.main_fun, args=self.args, roles=self.roles,
            default_fs=hconf.get("fs.defaultFS") or "file:///", working_dir=os.getcwd(),
            model_dir=self.model_dir, log_dir=self.log_dir, env=self.env, legacy_keras=self.legacy_keras,
            stop_grace_secs=self.stop_grace_secs, feed_buffer_bytes=self.feed_buffer_bytes,
        )

    def _run_job(self) -> None:
        n = len(self.roles)
        failure: BaseException | None = None
        try:
            self.sc.setJobGroup(self.job_group, f"tfos_notebook run {self.name}", interruptOnCancel=True)
            self.sc.parallelize(range(n), n).barrier().mapPartitions(self._plan()).collect()
        except BaseException as e:  # Py4JJavaError and friends: summarised below
            failure = e
        with self._lock:
            if self._stop_requested:
                self._finish("stopped", RunStopped(f"run {self.name} was stopped"))
            elif self.error is not None:
                self._finish("failed", self.error)
            elif failure is not None:
                self._finish("failed", SparkJobError(f"the Spark job of run {self.name} failed: "
                                                     f"{_spark_error_summary(failure)}"))
            else:
                missing = [nd.name for nd in self._nodes if nd.state != "finished"]
                if missing:
                    self._finish("failed", SparkJobError(f"nodes {missing} ended without reporting a result"))
                else:
                    self._finish("finished")

    def _watch_reservations(self) -> None:
        ready = self.events.wait_for(
            lambda evs: any(isinstance(e, (ClusterReady, RunFinished)) for e in evs), self.reservation_timeout
        )
        if ready:
            return
        with self._lock:
            registered = [nd for nd in self._nodes if nd.conn is not None]
            missing = [nd.name for nd in self._nodes if nd.conn is None]
            snap = preflight.snapshot(self.sc, len(self.roles), tuple(f"{r}:{i}" for r, i in self.roles),
                                      self.gpus_per_node, time.monotonic() - self.started_at)
            findings = diagnose(snap) or [Finding(
                "reservation_timeout",
                f"{len(missing)} of {len(self.roles)} nodes did not register within {self.reservation_timeout:.0f}s",
                (f"registered: {[nd.name for nd in registered]}", f"missing: {missing}"),
                "check the executors' stderr for errors, or raise reservation_timeout",
            )]
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
        elif kind == "feed" and self.feeder is not None:
            self.feeder.on_message(node, msg)
        else:
            raise channel.ChannelError(f"unknown message type {kind!r}")

    def _on_register(self, conn: channel.Connection, msg: dict) -> None:
        task = msg.get("task")
        with self._lock:
            if not isinstance(task, int) or not 0 <= task < len(self._nodes) or self._nodes[task].conn is not None:
                raise channel.ChannelError(f"bad or duplicate registration for task {task!r}")
            node = self._nodes[task]
            node.conn, node.host, node.port = conn, str(msg["host"]), int(msg["port"])
            node.executor_id = str(msg.get("executor_id", ""))
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
                self.events.publish(ClusterReady(self.run_id, cluster_spec=spec))

    def _set_state(self, node: _Node, state: str, detail: str = "") -> None:
        node.state = state
        self.events.publish(TaskState(self.run_id, task=node.task, role=node.role, index=node.index,
                                      state=state, detail=detail))

    def _on_result(self, node: _Node, msg: dict) -> None:
        with self._lock:
            if msg.get("ok"):
                node.value = pickle.loads(msg["value"])  # authenticated channel, from our own node
                self._set_state(node, "finished")
            elif msg.get("stopped"):
                bg_done = node.role in BACKGROUND_ROLES and self._foreground_done_at is not None
                self._set_state(node, "finished" if bg_done else "stopped",
                                "stopped after the training nodes finished" if bg_done else "")
                return
            else:
                self._set_state(node, "failed", f"exit code {msg.get('exit_code')}")
                self._abort(NodeError(node.role, node.index, node.host, str(msg.get("traceback", "")),
                                      msg.get("exit_code")))
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

    def _on_close(self, conn: channel.Connection) -> None:
        node: _Node | None = conn.attrs.get("node")
        with self._lock:
            if node is None or self._done.is_set() or self._stop_requested or self.error is not None:
                return
            if node.state in ("registered", "running"):
                self._set_state(node, "failed", "connection lost")
                self._abort(NodeError(node.role, node.index, node.host,
                                      "the node's connection closed before it reported a result: its executor "
                                      "or Python worker died (see the executor's stderr in the Spark UI)"))

    # -- ending --------------------------------------------------------------------------------
    def _abort(self, error: BaseException) -> None:
        """Fail the run: tell every node to stop, then cancel the job group if it lingers."""
        with self._lock:
            if self.error is None:
                self.error = error
            for nd in self._nodes:
                if nd.conn is not None:
                    _send_quietly(nd.conn, {"type": "stop"})
        threading.Thread(target=self._cancel_after_grace, daemon=True).start()

    def _cancel_after_grace(self) -> None:
        if not self._thread_done(self.stop_grace_secs + 2.0):
            self.sc.cancelJobGroup(self.job_group)

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

