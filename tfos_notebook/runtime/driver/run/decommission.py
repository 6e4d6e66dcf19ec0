"""A decommission notice becomes a checkpoint: the driver's side (the node's is
``runtime/node/child/savepoint.py``, which says how the nodes agree on the step to save at).

Each watch of a running attempt asks the Spark backend whether an executor hosting a node is
decommissioning (``SparkBackend.decommissioning``). The first notice is published
(``Decommissioning``, and a finding naming the executor and host) and every node is told
``SaveSoon``; the first node to reach a step boundary names the step to save at (its step + 1),
which every node acknowledges before the held loops go on; once every training node has saved,
the attempt ends and the run is relaunched from the checkpoint (``Supervisor.decommissioned``).
A function that never reaches a boundary (no ``ctx.callbacks()``, no ``ctx.step_boundary``) is
named after ``SAVE_WAIT_SECS``; the run then goes on until the executor leaves, and is relaunched
from its last periodic checkpoint, as after any lost node.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...wire import messages as m
from ...wire.plan import FOREGROUND_ROLES
from ...wire.states import NodeState
from ..events import CheckpointSaved, Decommissioning
from ..events.finding import Finding
from .coordinator import send_quietly

if TYPE_CHECKING:
    from ..events import EventStream
    from .coordinator import Coordinator
    from .noderecord import NodeRecord

SAVE_WAIT_SECS = 30.0  # a notice no node answered by then is named
POLL_SECS = 0.5  # how often the scheduler is asked (one gateway call per executor hosting a node)

SAVE_REMEDY = ("pass callbacks=ctx.callbacks() to model.fit, or call ctx.step_boundary(step, manager.save) after "
               "each step of a custom loop")


class Decommission:
    """The decommission checkpoint of one attempt (``coord``'s nodes). ``saved(step, path, secs)``
    is called (with the run's lock held) once every training node saved; ``publish`` takes findings.
    The notice, the target step, the acknowledgements and the saves are guarded by the run's lock
    (``coord.lock``): the nodes' messages (connection threads) and the supervisor's poll both
    change them."""

    def __init__(self, coord: Coordinator, events: EventStream, publish: Callable[[list[Finding]], None],
                 saved: Callable[[int, str, float], None]) -> None:
        self.coord, self.events, self.publish, self.on_saved = coord, events, publish, saved
        self.noticed_at: float | None = None
        self.notice = ""
        self.target: int | None = None
        self.acks: set[str] = set()
        self.held: list[NodeRecord] = []
        self.saves: dict[str, tuple[int, str]] = {}
        self._last_poll = 0.0
        self._named = False
        self._ended = False

    # -- the watch (the supervisor's thread) ------------------------------------------------------
    def poll(self, backend, now: float) -> None:
        """Ask ``backend`` about the executors of the running nodes, at most every ``POLL_SECS``."""
        if now - self._last_poll < POLL_SECS:
            return
        self._last_poll = now
        if self.noticed_at is not None:
            self._overdue(now)
            with self.coord.lock:
                self._all_saved()  # a node that finished meanwhile (nodes without a strategy run apart)
            return
        with self.coord.lock:
            hosting = {nd.executor_id for nd in self.coord.nodes if nd.executor_id and nd.state.live}
        leaving = backend.decommissioning(hosting) if hosting else {}
        if leaving:
            self._noticed(leaving, now)

    def _noticed(self, leaving: dict[str, str], now: float) -> None:
        with self.coord.lock:
            if self.noticed_at is not None:
                return
            self.noticed_at = now
            parts = []
            for executor_id, host in sorted(leaving.items()):
                nodes = tuple(nd.name for nd in self.coord.nodes if nd.executor_id == executor_id)
                where = next((nd.where for nd in self.coord.nodes if nd.executor_id == executor_id), "") or host
                self.events.publish(Decommissioning(self.coord.run_id, executor_id=executor_id, host=where,
                                                    nodes=nodes))
                parts.append(f"executor {executor_id} on {where} (nodes {', '.join(nodes)}) is decommissioning")
            self.notice = "; ".join(parts)
        self.publish([Finding(
            code="executor_decommissioning", cause=self.notice,
            evidence=("Spark's scheduler holds the executor as decommissioning (spark.decommission.enabled)",),
            remedy="nothing to do: the nodes save a checkpoint at their next step and the run goes on from it "
                   "on the slots the cluster still has (min_workers)", severity="warning")])
        self.coord.broadcast(m.SaveSoon(self.notice))

    def _overdue(self, now: float) -> None:
        if self._named or self.saves or self.noticed_at is None or now - self.noticed_at < SAVE_WAIT_SECS:
            return
        self._named = True
        self.publish([Finding(
            code="decommission_not_saved",
            cause=f"{self.notice}, and no node saved a checkpoint within {SAVE_WAIT_SECS:.0f}s: the function does "
                  "not stop at step boundaries, so the run will resume from its last periodic checkpoint once "
                  "the executor is gone",
            evidence=(f"nodes at a boundary: {len(self.held) or 'none'}",), remedy=SAVE_REMEDY, severity="warning")])

    # -- the nodes' messages (connection threads) ------------------------------------------------
    def handle(self, node: NodeRecord, msg: m.Message) -> None:
        with self.coord.lock:
            if isinstance(msg, m.AtBoundary):
                self.held.append(node)
                if self.target is None:
                    self.target = msg.step + 1
                    self.coord.broadcast(m.SaveAt(self.target))
            elif isinstance(msg, m.SaveAtSeen):
                self.acks.add(node.name)
            elif isinstance(msg, m.Saved):
                self.saves[node.name] = (msg.step, msg.path)
                self._all_saved()
                return
            self._let_go()

    def _let_go(self) -> None:
        """Once every live node knows the step, the held loops go on."""
        live = {nd.name for nd in self.coord.nodes if nd.conn is not None and nd.state.live}
        if self.target is None or not live <= self.acks:
            return
        for node in self.held:
            send_quietly(node.conn, m.SaveGo())
        self.held = []

    def _all_saved(self) -> None:
        """Once every training node saved (or, running apart from the others, finished before it
        reached the step), the attempt ends: once."""
        training = [nd for nd in self.coord.nodes if nd.role in FOREGROUND_ROLES]
        if self._ended or not self.saves or \
                not all(nd.name in self.saves or nd.state is NodeState.FINISHED for nd in training):
            return
        self._ended = True
        # the chief's save is the one the nodes resume from (nodes running apart may have saved later steps)
        chief = next((nd.name for nd in training if nd.role in ("chief", "master")), "worker:0")
        step, path = self.saves.get(chief) or min(self.saves.values())
        path = path or next((p for _, p in self.saves.values() if p), "")
        secs = time.monotonic() - (self.noticed_at or time.monotonic())
        self.events.publish(CheckpointSaved(self.coord.run_id, attempt=self.coord.attempt, step=step, path=path,
                                            seconds=secs))
        self.on_saved(step, path, secs)
