"""The observing half of a run's API: its state, nodes and results as they stand, what is wrong
with it now, and the waits for its reservations and its end. ``Run`` owns a :class:`RunOutcome`
(``run.outcome``) and answers these for it; the state is the run's
:class:`~.lifecycle.Lifecycle`, the nodes are its supervisor's current coordinator's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...wire.plan import chief_of
from ..errors import ConfigError
from ..events import ClusterReady, RunFinished
from ..events.finding import Finding
from .lifecycle import RunState
from .noderecord import NodeRecord

if TYPE_CHECKING:
    from ..diagnosis.watch import LiveDiagnosis
    from ..events import EventStream
    from .lifecycle import Lifecycle
    from .supervisor import Supervisor


class RunOutcome:
    """How the run named ``name`` stands and ends. ``started_at`` (``time.monotonic()``) is set as
    the run starts. Takes no lock: each member reads the lifecycle's or the coordinator's fields one
    at a time (a transition, which holds the run's lock, sets ``done`` last)."""

    def __init__(self, name: str, lifecycle: Lifecycle, events: EventStream, diagnosis: LiveDiagnosis,
                 supervisor: Supervisor) -> None:
        self.name = name
        self.lifecycle, self.events, self.diagnosis, self.supervisor = lifecycle, events, diagnosis, supervisor
        self.started_at: float | None = None

    @property
    def state(self) -> RunState:
        """See :class:`~.lifecycle.RunState`: ``new``, ``reserving``, ``running``, ``relaunching``,
        ``stopping``, ``failing``, or a terminal state: ``finished``, ``failed``, ``stopped``."""
        return self.lifecycle.state

    @property
    def attempt(self) -> int:
        return self.lifecycle.attempt

    @property
    def error(self) -> BaseException | None:
        """The run's error once it is failing or has failed (None while it goes well)."""
        return self.lifecycle.error

    @property
    def done(self) -> bool:
        return self.lifecycle.done.is_set()

    @property
    def job_group(self) -> str:
        """The tag (job group) of the current attempt's Spark job."""
        return self.lifecycle.job_group

    @property
    def cluster_spec(self) -> dict[str, list[str]]:
        """The current attempt's cluster spec once every node registered (else empty)."""
        return self.supervisor.coord.cluster_spec

    @property
    def nodes(self) -> list[NodeRecord]:
        """The current attempt's node records, in task order."""
        return self.supervisor.coord.nodes

    @property
    def results(self) -> dict[str, Any]:
        """Return values of the nodes whose function returned, by ``role:index`` (a ps or evaluator
        stopped after the training nodes finished has none)."""
        return {n.name: n.value for n in self.nodes if n.returned}

    @property
    def result(self) -> Any:
        """The chief's return value (worker 0's when there is no chief)."""
        chief = chief_of([(n.role, n.index) for n in self.nodes])
        return next((n.value for n in self.nodes if (n.role, n.index) == chief), None)

    def node_states(self) -> dict[str, str]:
        return {nd.name: nd.state.value for nd in self.nodes}

    def diagnose(self) -> list[Finding]:
        """Findings about this run and the cluster now (for ``%tfos_diagnose``): what was raised so
        far and a fresh diagnosis."""
        raised = self.diagnosis.raised()
        fresh = self.diagnosis.live(self.job_group, self.supervisor.coord.registered()) if self.started_at else []
        seen = {(f.code, f.cause) for f in raised}
        return raised + [f for f in fresh if (f.code, f.cause) not in seen]

    def wait_for_reservations(self, timeout: float | None = None) -> dict[str, list[str]]:
        """Block until every node registered; returns the cluster spec or raises the run's error."""
        self._check_started("wait_for_reservations")
        self.events.wait_for(lambda evs: any(isinstance(e, (ClusterReady, RunFinished)) for e in evs), timeout)
        if self.error is not None and not self.cluster_spec:
            raise self.error
        if not self.cluster_spec:
            raise TimeoutError(f"run {self.name}: not every node registered within {timeout}s")
        return self.cluster_spec

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the run ends; returns the chief's value, or raises the run's error
        (``NodeError`` with the node's traceback, ``ReservationTimeout``, ``RunStopped``...)."""
        self.ended(timeout)
        return self.value()

    def ended(self, timeout: float | None = None) -> None:
        """Block until the run has ended, its last job included (``TimeoutError`` after ``timeout``
        seconds; ``ConfigError`` for a run never started)."""
        self._check_started("wait")
        if not self.lifecycle.done.wait(timeout):
            raise TimeoutError(f"run {self.name} still {self.state} after {timeout}s")
        self.supervisor.join()

    def value(self) -> Any:
        """The ended run's chief's value, or its error raised."""
        if self.error is not None:
            raise self.error
        return self.result

    def _check_started(self, what: str) -> None:
        if self.state is RunState.NEW:
            raise ConfigError(f"run {self.name} was never started: call start() before {what}()")
