"""A run's and a node's lifecycle: the states, the legal transitions, and one locked transition
function that publishes every change on the run's event stream.

Every view (the monitor, the text lines, the runs registry) learns a run's state from the
``RunStateChanged`` events published here, never by re-deriving it.

::

    new ─► reserving ─► running ─► finished
     │        │  ▲         │
     │        │  └ relaunching ◄┤ (a node was lost, retries left)
     │        ├────────────────┴─► failing ─► failed      (an error; the attempt winds down)
     │        └────────────────┴─► stopping ─► stopped    (stop requested)
     └─► failed (pre-flight) / stopped (stopped before start)
"""

from __future__ import annotations

import threading

from ...wire.states import NodeState, State
from ..errors import TFOSError
from ..events import EventStream, RunFinished, RunStateChanged


class RunState(State):
    NEW = "new"
    RESERVING = "reserving"
    RUNNING = "running"
    RELAUNCHING = "relaunching"
    STOPPING = "stopping"
    FAILING = "failing"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def ending(self) -> bool:
        """The attempt is winding down towards an end or a relaunch: no node may start training."""
        return self in (RunState.RELAUNCHING, RunState.STOPPING, RunState.FAILING) or self.terminal


TERMINAL = frozenset({RunState.FINISHED, RunState.FAILED, RunState.STOPPED})

_RUN_EDGES: dict[RunState, frozenset[RunState]] = {
    RunState.NEW: frozenset({RunState.RESERVING, RunState.FAILED, RunState.STOPPED}),
    RunState.RESERVING: frozenset({RunState.RUNNING, RunState.RELAUNCHING, RunState.STOPPING, RunState.FAILING,
                                   RunState.FAILED}),
    RunState.RUNNING: frozenset({RunState.RELAUNCHING, RunState.STOPPING, RunState.FAILING, RunState.FINISHED,
                                 RunState.FAILED}),
    RunState.RELAUNCHING: frozenset({RunState.RESERVING, RunState.STOPPING, RunState.FAILED}),
    RunState.STOPPING: frozenset({RunState.STOPPED}),
    RunState.FAILING: frozenset({RunState.FAILED}),
}

_NODE_EDGES: dict[NodeState, frozenset[NodeState]] = {
    NodeState.SCHEDULED: frozenset({NodeState.REGISTERED, NodeState.FAILED, NodeState.STOPPED}),
    NodeState.REGISTERED: frozenset({NodeState.RUNNING, NodeState.FINISHED, NodeState.FAILED, NodeState.STOPPED}),
    NodeState.RUNNING: frozenset({NodeState.FINISHED, NodeState.FAILED, NodeState.STOPPED}),
}


class IllegalTransition(TFOSError, RuntimeError):
    """A state change the lifecycle does not allow (a bug, or a late message of an ended node)."""


def node_transition_allowed(old: NodeState, new: NodeState) -> bool:
    return new in _NODE_EDGES.get(old, frozenset())


class Lifecycle:
    """The state of one run, changed only through :meth:`transition` under ``lock``.

    ``error`` is the run's outcome once it is failing or ended (``None`` when it finished);
    ``done`` is set with the terminal state, after its event was published. ``lock`` (re-entrant)
    is the run's lock: made here and handed to the run's supervisor, coordinators and heartbeat,
    it guards the state, ``error`` and ``attempt`` and what those parts keep (see ``launch.py``)."""

    def __init__(self, run_id: str, events: EventStream) -> None:
        self.run_id = run_id
        self.events = events
        self.lock = threading.RLock()
        self.state = RunState.NEW
        self.error: BaseException | None = None
        self.attempt = 0
        self.done = threading.Event()
        self.changed = threading.Condition(self.lock)

    @property
    def job_group(self) -> str:
        """The tag (job group) of the current attempt's Spark job."""
        return f"tfos-{self.run_id}" + (f"-a{self.attempt}" if self.attempt else "")

    def relaunch(self) -> int:
        """Begin the next attempt of a relaunching run (it reserves again); returns its number."""
        with self.lock:
            self.attempt += 1
            self.transition(RunState.RESERVING)
            return self.attempt

    def can(self, new: RunState) -> bool:
        return new in _RUN_EDGES.get(self.state, frozenset())

    def transition(self, new: RunState, error: BaseException | None = None) -> None:
        """Move to ``new`` (keeping the first ``error`` given), publish it, and on a terminal
        state set ``done``. Raises ``IllegalTransition`` for a change the lifecycle forbids."""
        with self.lock:
            if not self.can(new):
                raise IllegalTransition(f"run {self.run_id}: {self.state} -> {new} is not a legal transition")
            if error is not None and self.error is None:
                self.error = error
            self.state = new
            text = str(self.error) if self.error is not None else ""
            event = (RunFinished if new.terminal else RunStateChanged)(
                self.run_id, state=new.value, error=text, attempt=self.attempt)
            self.events.publish(event)
            if new.terminal:
                self.done.set()
            self.changed.notify_all()

    def try_transition(self, new: RunState, error: BaseException | None = None) -> bool:
        """:meth:`transition` where a race may have got there first: False (and nothing changes)
        when the change is not legal from the current state."""
        with self.lock:
            if not self.can(new):
                return False
            self.transition(new, error)
            return True
