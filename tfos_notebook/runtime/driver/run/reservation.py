"""The reservation of an attempt's nodes: free task slots for every node before its barrier job is
submitted, then every node registering, with the findings that say what holds them. A
:class:`Reservation` belongs to a run's :class:`~.supervisor.Supervisor`, which hands it the
run's parts it reads and ``abort``, its way of ending the attempt."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...host.timeouts import Deadline
from ..errors import LaunchError, PreflightError, ReservationTimeout, SparkJobError
from ..events.finding import Finding, blockers
from ..spark import error_summary
from .lifecycle import RunState

if TYPE_CHECKING:
    from ..diagnosis.watch import LiveDiagnosis
    from ..spark import SparkBackend
    from .coordinator import Coordinator
    from .lifecycle import Lifecycle
    from .supervised import AttemptLimits

WATCH_INTERVAL = 0.25  # how often the supervisor looks at a running attempt


class Reservation:
    """The reservations of the run named ``name`` (``roles``: one node each), attempt by attempt."""

    def __init__(self, name: str, roles: list[tuple[str, int]], *, lifecycle: Lifecycle, backend: SparkBackend,
                 diagnosis: LiveDiagnosis, limits: AttemptLimits, abort: Callable[[LaunchError], None]) -> None:
        self.name, self.roles, self.lifecycle, self.backend = name, roles, lifecycle, backend
        self.diagnosis, self.limits, self.abort = diagnosis, limits, abort

    def wait_for_slots(self, deadline: Deadline) -> bool:
        """Hold the attempt back until the cluster has a free task slot for each node: a barrier
        job that cannot be scheduled is never handed to Spark (it would retry it for about 10
        minutes, the run stuck in ``reserving``). Meanwhile a ``waiting_for_slots`` finding says
        what holds them; a blocker (executors came, and too few) or ``deadline`` fails the run.
        Where the backend only estimates its view (Spark Connect) the gang is submitted at once and
        ``gang_not_started`` speaks for it. A cluster that cannot be read (the SparkContext stopped
        under the run) fails it. Whether to submit (False: stopped or failed)."""
        n, limits, group = len(self.roles), self.limits, self.lifecycle.job_group
        last_diagnosis = -1.0
        while self.lifecycle.state is RunState.RESERVING:
            try:
                view = self.backend.cluster(group)
            except Exception as e:  # the SparkContext was stopped under the run, or its JVM is gone
                self.abort(SparkJobError(f"run {self.name} cannot read the cluster's free slots: {error_summary(e)}"))
                break
            if not view.exact or view.free_slots >= n:
                return True
            if deadline.expired or time.monotonic() - last_diagnosis >= 1.0:
                last_diagnosis = time.monotonic()
                findings = self.diagnosis.waiting_for_slots(group, limits.reservation_timeout)
                self.diagnosis.publish(findings)
                if blockers(findings):
                    self.abort(PreflightError(f"cannot launch {n} nodes:", blockers(findings)))
                elif deadline.expired:
                    self.abort(ReservationTimeout(
                        f"run {self.name}: waited {limits.reservation_timeout:.0f}s for {n} free task slots, "
                        f"{view.free_slots} free", findings))
            deadline.sleep(WATCH_INTERVAL)
        return False

    def registrations(self, coord: Coordinator, deadline: Deadline) -> Registrations:
        """The watch over ``coord``'s nodes registering, once the attempt's job was submitted."""
        return Registrations(self, coord, deadline)

    def timed_out(self, coord: Coordinator, stalled_for: float) -> None:
        """Not every node registered in time: the findings that say why, and the attempt ends."""
        timeout = self.limits.reservation_timeout
        registered, missing = coord.registered(), coord.missing()
        findings = self.diagnosis.live(self.lifecycle.job_group, registered, stalled_for)
        findings = blockers(findings) or findings or [Finding(
            code="reservation_timeout",
            cause=f"{len(missing)} of {len(self.roles)} nodes did not register within {timeout:.0f}s",
            evidence=(f"registered: {registered}", f"missing: {missing}"),
            remedy="check the executors' stderr for errors, or raise reservation_timeout",
        )]
        self.diagnosis.publish(findings)
        self.abort(ReservationTimeout(f"run {self.name}: waited {timeout:.0f}s for "
                                      f"{len(self.roles)} reservations, got {len(registered)}", findings))


class Registrations:
    """One attempt's nodes registering: :meth:`tick` diagnoses a stall (no node registered for
    ``stall_secs``) and fails the attempt at ``deadline``."""

    def __init__(self, reservation: Reservation, coord: Coordinator, deadline: Deadline) -> None:
        self.reservation, self.coord, self.deadline = reservation, coord, deadline
        self.count, self.last_change, self.last_diagnosis = 0, time.monotonic(), 0.0

    def tick(self, now: float) -> None:
        reservation = self.reservation
        registered = self.coord.registered()
        if self.deadline.expired:
            reservation.timed_out(self.coord, now - self.last_change)
        elif len(registered) != self.count:
            self.count, self.last_change = len(registered), now
        elif now - self.last_change >= reservation.limits.stall_secs and now - self.last_diagnosis >= 1.0:
            self.last_diagnosis = now
            diagnosis = reservation.diagnosis
            diagnosis.publish(diagnosis.live(reservation.lifecycle.job_group, registered, now - self.last_change))
