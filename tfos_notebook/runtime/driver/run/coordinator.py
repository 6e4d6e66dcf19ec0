"""The driver's node table for one attempt of a run, and the handlers of the nodes' messages.

A :class:`Coordinator` knows nothing of Spark: it is fed decoded control messages and connection
closes, keeps each node's record and state, publishes what it learns on the event stream, and
tells its run (through ``noderecord.Hooks``) when the cluster is complete, when a node failed or was
lost, and when the training nodes are done. Tests drive it with fake connections.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict

from ...host.filetail import Chunk
from ...host.paths import is_trace_of, node_dir_name
from ...wire import messages as m
from ...wire import values
from ...wire.plan import FOREGROUND_ROLES
from ...wire.states import NodeState
from ..diagnosis.nodes import diagnose_failure
from ..errors import ChannelError, NodeError, ResultError
from ..events import (
    ClusterReady,
    Event,
    EventStream,
    GpuAssigned,
    GpuStats,
    Log,
    MlflowCalled,
    ModelExported,
    NodeMemory,
    Pace,
    ProfileCaptured,
    Registered,
    Step,
    SystemStats,
    TaskState,
)
from .lifecycle import node_transition_allowed
from .noderecord import Conn, Hooks, NodeRecord

log = logging.getLogger(__name__)


BACKGROUND_ROLES = ("ps", "evaluator")


def send_quietly(conn: Conn, msg: m.Message) -> None:
    """Send ``msg``; a node that has gone is no error here (its close is handled on its own)."""
    try:
        conn.send(m.encode(msg))
    except OSError as e:
        log.debug("could not send %s to a node: %s", msg.TYPE, e)


class Coordinator:
    """The nodes of attempt ``attempt`` of run ``run_id`` and their messages.

    ``lock`` is the run's (its lifecycle's, handed on by the supervisor): it guards the node table
    (each record's connection, state and result; ``cluster_spec``), which connection threads and
    the supervisor's thread both touch, and is held while ``hooks`` are called."""

    def __init__(self, run_id: str, roles: list[tuple[str, int]], attempt: int, events: EventStream,
                 lock, hooks: Hooks) -> None:
        self.run_id, self.roles, self.attempt = run_id, roles, attempt
        self.events, self.lock, self.hooks = events, lock, hooks
        self.nodes = [NodeRecord(t, r, i) for t, (r, i) in enumerate(roles)]
        self.cluster_spec: dict[str, list[str]] = {}
        self.foreground_finished = False

    # -- views ---------------------------------------------------------------------------------
    def registered(self) -> list[str]:
        with self.lock:
            return [nd.name for nd in self.nodes if nd.conn is not None]

    def missing(self) -> list[str]:
        with self.lock:
            return [nd.name for nd in self.nodes if nd.conn is None]

    def connections(self) -> list[Conn]:
        with self.lock:
            return [nd.conn for nd in self.nodes if nd.conn is not None]

    def silent(self, secs: float) -> list[NodeRecord]:
        """Registered nodes still running that have sent nothing for ``secs`` seconds."""
        now = time.monotonic()
        with self.lock:
            return [nd for nd in self.nodes if nd.conn is not None and nd.state.live and now - nd.heard > secs]

    def owns(self, node: NodeRecord | None) -> bool:
        return node is not None and 0 <= node.task < len(self.nodes) and self.nodes[node.task] is node

    # -- to the nodes --------------------------------------------------------------------------
    def broadcast(self, msg: m.Message, roles: tuple[str, ...] | None = None) -> None:
        """Send ``msg`` to every registered node that has not ended (of ``roles``, if given)."""
        with self.lock:
            targets = [nd.conn for nd in self.nodes
                       if nd.conn is not None and not nd.state.terminal and (roles is None or nd.role in roles)]
        for conn in targets:
            send_quietly(conn, msg)

    def tell(self, names: list[str], msg: m.Message) -> None:
        """Send ``msg`` to the registered nodes named ``names`` (``role:index``) that have not ended."""
        with self.lock:
            targets = [nd.conn for nd in self.nodes if nd.name in names and nd.conn is not None
                       and not nd.state.terminal]
        for conn in targets:
            send_quietly(conn, msg)

    # -- from the nodes ------------------------------------------------------------------------
    def handle(self, conn: Conn, msg: m.Message) -> None:
        """One decoded message from ``conn``. ``ChannelError``: it makes no sense here (the
        receiver counts it; the node is not failed for it)."""
        if isinstance(msg, m.Register):
            self._register(conn, msg)
            return
        if isinstance(msg, m.NodeQuery):
            send_quietly(conn, self._answer(msg.task))
            return
        node: NodeRecord | None = conn.attrs.get("node")
        if node is None:
            raise ChannelError(f"{msg.TYPE!r} message before registration")
        if not self.owns(node):
            return  # a node of an earlier attempt, still winding down
        node.heard = time.monotonic()
        if isinstance(msg, m.Pong):
            return
        event = self._report(node, msg)
        if event is not None:
            self.events.publish(event)
        elif isinstance(msg, m.Logs):
            for stream, line in msg.lines:
                self.events.publish(Log(self.run_id, task=node.task, role=node.role, index=node.index,
                                        stream=stream, line=line))
        elif isinstance(msg, m.NodeStateReport):
            if msg.state != NodeState.RUNNING:
                raise ChannelError(f"a node cannot report state {msg.state!r}")
            with self.lock:
                self._set_state(node, NodeState.RUNNING)
        elif isinstance(msg, m.Result):
            with self.lock:
                self._result(node, msg)
        elif isinstance(msg, m.Leftovers):
            self.hooks.leftovers(msg.items)
        elif isinstance(msg, m.Files):
            self._files(conn, node, msg)
        elif isinstance(msg, (m.FeedServing, m.FeedReport)):
            self.hooks.feed(node, msg)
        elif isinstance(msg, (m.AtBoundary, m.SaveAtSeen, m.Saved)):
            self.hooks.savepoint(node, msg)
        else:
            raise ChannelError(f"a node cannot send {msg.TYPE!r}")

    def _report(self, node: NodeRecord, msg: m.Message) -> Event | None:
        """The event a node's report is published as (None: ``msg`` is not such a report)."""
        who = {"task": node.task, "role": node.role, "index": node.index}
        if isinstance(msg, m.StepReport):
            return Step(self.run_id, step=msg.step, metrics=dict(msg.metrics), **who)
        if isinstance(msg, m.GpuReport):
            return GpuStats(self.run_id, host=node.host, **who, gpus=tuple(
                (g["address"], g["utilization"], g["used_mib"], g["total_mib"]) for g in msg.gpus))
        if isinstance(msg, m.MemoryReport):
            return NodeMemory(self.run_id, host=node.host, rss_mib=msg.rss_mib, host_available_mib=msg.host_available_mib,
                              host_total_mib=msg.host_total_mib, cap_mib=msg.cap_mib, **who)
        if isinstance(msg, m.SystemReport):
            return SystemStats(self.run_id, cpu_percent=msg.cpu_percent, memory_used_mb=msg.memory_used_mb,
                               memory_percent=msg.memory_percent, **who)
        if isinstance(msg, m.MlflowCalls):
            return MlflowCalled(self.run_id, metrics=msg.metrics, params=msg.params, tags=msg.tags, **who)
        if isinstance(msg, m.ModelExport):
            return ModelExported(self.run_id, path=msg.path, keras=msg.keras, **who)
        if isinstance(msg, m.PaceReport):
            return Pace(self.run_id, host=node.where, **who, **asdict(msg))
        if isinstance(msg, m.ProfileDone):
            return ProfileCaptured(self.run_id, session=msg.session, ok=msg.ok, detail=msg.detail, **who)
        return None

    def _register(self, conn: Conn, msg: m.Register) -> None:
        with self.lock:
            if self.hooks.ending():  # late: the attempt already ends, so this node must not wait for a cluster
                send_quietly(conn, m.Stop())
                return
            why = (f"registration for attempt {msg.attempt}, now {self.attempt}" if msg.attempt != self.attempt
                   else f"bad or duplicate registration for task {msg.task}"
                   if not 0 <= msg.task < len(self.nodes) or self.nodes[msg.task].conn is not None else "")
            if why:  # a node of a lost attempt, or a task Spark retried: it must not wait for a cluster
                send_quietly(conn, m.Stop())
                raise ChannelError(why)
            node = self.nodes[msg.task]
            node.conn, node.host, node.port, node.executor_id = conn, msg.host, msg.port, msg.executor_id
            node.hostname, node.sees_model_dir, node.heard = msg.hostname, msg.sees_model_dir, time.monotonic()
            conn.attrs["node"] = node
            self.hooks.versions(node, msg.python, msg.tensorflow)
            node.state = NodeState.REGISTERED
            self.events.publish(Registered(self.run_id, task=node.task, role=node.role, index=node.index,
                                           host=node.host, executor_id=node.executor_id, port=node.port,
                                           pid=msg.pid, gpus=msg.gpus, started=msg.started, keras=msg.keras))
            if msg.gpus:
                self.events.publish(GpuAssigned(self.run_id, task=node.task, role=node.role, index=node.index,
                                                host=node.host, addresses=msg.gpus))
            if all(nd.conn is not None for nd in self.nodes):
                spec: dict[str, list[str]] = {}
                for nd in self.nodes:
                    spec.setdefault(nd.role, []).append(f"{nd.host}:{nd.port}")
                if self.hooks.cluster_ready(spec):
                    self.cluster_spec = spec
                    unseen = [f"{nd.name} on {nd.where}" for nd in self.nodes if not nd.sees_model_dir]
                    if unseen:
                        self.hooks.model_dir_unseen(unseen)
                    for nd in self.nodes:
                        send_quietly(nd.conn, m.Cluster(spec, model_dir_shared=not unseen))
                    self.events.publish(ClusterReady(self.run_id, cluster_spec=spec))

    def _answer(self, task: int) -> m.NodeAnswer:
        """What became of node ``task``: its own failure, or, once it ended, the failure that ended it."""
        with self.lock:
            if not 0 <= task < len(self.nodes):
                return m.NodeAnswer("unknown")
            node = self.nodes[task]
            cause = next((nd.failure for nd in self.nodes if nd.failure), "") if not node.state.live else ""
            return m.NodeAnswer(node.state.value, node.failure or (f"the run ended: {cause}" if cause else ""))

    def _fail(self, node: NodeRecord, error: NodeError, retryable: bool, detail: str) -> None:
        """``node`` failed with ``error`` (unless it had ended already)."""
        if not self._set_state(node, NodeState.FAILED, detail):
            return
        lines = error.traceback_text.strip().splitlines()
        node.failure = f"{node.name} on {node.where} failed: " + " | ".join(lines[-3:] if lines else [detail])
        self.hooks.node_failed(error, retryable=retryable)

    def _set_state(self, node: NodeRecord, state: NodeState, detail: str = "") -> bool:
        if not node_transition_allowed(node.state, state):
            log.warning("run %s: %s reported %s while %s; ignored", self.run_id, node.name, state, node.state)
            return False
        node.state = state
        self.events.publish(TaskState(self.run_id, task=node.task, role=node.role, index=node.index,
                                      state=state.value, detail=detail))
        return True

    def _result(self, node: NodeRecord, msg: m.Result) -> None:
        if msg.ok:
            try:
                value = values.decode(msg.value, msg.encoding) if msg.value is not None else None
            except Exception as e:  # the value's class cannot be imported here, or the bytes are bad
                self._fail(node, ResultError(node.role, node.index, node.where, msg.value_type, e), False,
                           "its return value cannot be unpickled")
                return
            if not self._set_state(node, NodeState.FINISHED):
                return
            node.value, node.returned = value, True
            foreground = [nd for nd in self.nodes if nd.role in FOREGROUND_ROLES]
            if not self.foreground_finished and all(nd.state == NodeState.FINISHED for nd in foreground):
                self.foreground_finished = True
                self.hooks.foreground_done()
        elif msg.stopped:
            after = node.role in BACKGROUND_ROLES and self.foreground_finished
            self._set_state(node, NodeState.FINISHED if after else NodeState.STOPPED,
                            "stopped after the training nodes finished" if after else "")
        elif node.state.live:
            findings = diagnose_failure(node.role, node.index, node.host, msg.traceback, node.port)
            self.hooks.findings(findings)
            killed = msg.exit_code is not None and msg.exit_code < 0  # a signal, not the function's exception
            self._fail(node, NodeError(node.role, node.index, node.where, msg.traceback, msg.exit_code, findings,
                                       msg.cause),
                       killed or msg.cause == "memory", "out of memory" if msg.cause else f"exit code {msg.exit_code}")

    def _files(self, conn: Conn, node: NodeRecord, msg: m.Files) -> None:
        chunks = [Chunk(rel, off, data) for rel, off, data in msg.chunks]
        node_dir = node_dir_name(node.role, node.index)
        if msg.area == m.PROFILE_AREA:  # traces go under the root, each named by its node
            wrong = [c.relpath for c in chunks if not is_trace_of(c.relpath, node_dir)]
            if wrong:
                raise ChannelError(f"{node.name} sent a profile file {wrong[0][:80]!r}, not one of its traces "
                                   f"(plugins/profile/<session>/{node_dir}.xplane.pb)")
            gaps = self.hooks.files("", chunks)
        elif msg.area:
            raise ChannelError(f"{node.name} sent files of an unknown area {msg.area[:40]!r}")
        else:
            gaps = self.hooks.files(node_dir, chunks)
        if gaps:
            send_quietly(conn, m.FilesRewind(gaps, msg.area))

    def unreachable(self, node: NodeRecord, secs: float) -> None:
        """``node`` has been silent for ``secs`` seconds: it is lost with its host (retryable), and
        its connection is closed."""
        with self.lock:
            if not self.owns(node) or not node.state.live:
                return
            self._fail(node, NodeError(
                node.role, node.index, node.where,
                f"the node sent nothing for {secs:.0f}s, heartbeat answers included: its host is unreachable "
                "(a network failure) or frozen"), True, "unreachable")
        node.conn.close()

    def closed(self, conn: Conn) -> None:
        """``conn`` ended: a registered node that had not ended was lost."""
        conn.attrs["gone"] = True
        node: NodeRecord | None = conn.attrs.get("node")
        with self.lock:
            if not self.owns(node) or not node.state.live or self.hooks.ending():
                return
            forged = conn.attrs.get("forged")
            if forged:  # not relaunched: whatever altered its traffic would be there again
                self._fail(node, NodeError(
                    node.role, node.index, node.where,
                    f"the node's control connection was dropped, and nothing more from it was read: {forged}. "
                    "Something between the driver and the node's host altered or replayed its traffic; check "
                    "the network path (or ask the cluster for encryption: spark.network.crypto.enabled)"),
                    False, "traffic forged")
                return
            self._fail(node, NodeError(
                node.role, node.index, node.where,
                "the node's connection closed before it reported a result: its executor or Python worker died "
                "(see the executor's stderr in the Spark UI)"), True, "connection lost")
