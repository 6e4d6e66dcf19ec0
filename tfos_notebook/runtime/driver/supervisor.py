"""The attempts of one run: each attempt's barrier job, its watch, and how the run ends.

A :class:`Supervisor` owns one thread per run, which submits an attempt's barrier job through the
Spark backend and watches it until it ends: it diagnoses a stalled reservation and fails it at the
timeout, stops ps / evaluator nodes once the training nodes are done, and cancels a job that
outlives its attempt's end by more than the stop grace. It is also the coordinator's
:class:`~.coordinator.Hooks`: a node that fails or is lost ends the attempt (relaunching the run
while retries are left), and when the last job ends it settles the run's outcome.
"""

from __future__ import annotations

import logging
import threading
import time
from functools import partial

from ..wire import messages as m
from ..wire.filetail import Chunk
from ..wire.states import NodeState
from ..wire.timeouts import Deadline
from ..wire.watchdog import WATCHDOG_SECS as CHILD_WATCHDOG_SECS
from .coordinator import BACKGROUND_ROLES, Coordinator
from .errors import (
    ChannelError,
    LaunchError,
    NodeError,
    PreflightError,
    ReservationTimeout,
    RunStopped,
    SparkJobError,
)
from .events import LaunchSubmitted, ModelDirUnshared
from .finding import Finding, blockers
from .heartbeat import Heartbeat
from .lifecycle import RunState
from .nodefindings import unshared_finding
from .noderecord import NodeRecord
from .spark import SparkJob, error_summary
from .supervised import SupervisedRun

log = logging.getLogger(__name__)

WATCH_INTERVAL = 0.25  # how often the supervisor looks at a running attempt
CANCEL_MARGIN = 2.0  # seconds past the stop grace before an ending attempt's job is cancelled


class Supervisor:
    """The attempts of ``run``; ``coord`` is the current attempt's coordinator."""

    def __init__(self, run: SupervisedRun) -> None:
        self.run = run
        self.lock = run.lifecycle.lock
        self.coord = self._coordinator(0)
        self.thread: threading.Thread | None = None
        self._ending_since: float | None = None  # when the current attempt began to wind down
        self._foreground_done_at: float | None = None
        self._settling = False
        self.heartbeat = Heartbeat(self.lock, run.diagnosis, self.abort)

    def _coordinator(self, attempt: int) -> Coordinator:
        return Coordinator(self.run.run_id, self.run.roles, attempt, self.run.events, self.lock, self)

    @property
    def state(self) -> RunState:
        return self.run.lifecycle.state

    def start(self) -> None:
        self.thread = self.run.backend.job_thread(self._attempts, name=f"tfos-run-{self.run.run_id}")
        self.thread.start()

    def join(self, timeout: float = 10.0) -> None:
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout)

    # -- the attempts --------------------------------------------------------------------------
    def _attempts(self) -> None:
        """Run the barrier job, again for each relaunch (``retries`` at most: see :meth:`abort`),
        then settle the run's outcome."""
        relaunched = True
        while relaunched:
            relaunched = self._attempt(self.coord)

    def _attempt(self, coord: Coordinator) -> bool:
        """One attempt: wait for slots, submit its job, watch it; whether the run relaunches (a
        new coordinator in place), else the run is settled."""
        run, n, tag = self.run, len(self.run.roles), self.run.job_group
        deadline = Deadline(run.reservation_timeout)  # free slots, then every node registered
        if not self._wait_for_slots(deadline):
            self._settle(None, coord)
            return False
        run.events.publish(LaunchSubmitted(run.run_id, num_tasks=n, roles=tuple(nd.name for nd in coord.nodes),
                                           attempt=coord.attempt))
        plan = run.plan(coord.attempt)
        body = (partial(run.instage.run_stage, run.backend, plan) if run.instage is not None
                else partial(run.backend.barrier, n, plan))
        job = run.backend.submit(tag, f"tfos_notebook run {run.name} attempt {coord.attempt}", body)
        self._watch(job, coord, deadline)
        # The nodes' connections close after their last message (the result): once they are all
        # gone, every result has been handled and the attempt's outcome is known.
        if job.error is not None:
            coord.broadcast(m.Stop())  # the job failed under them: nodes still running must end
        self._all_gone(coord.connections())
        with self.lock:
            relaunch = self.state is RunState.RELAUNCHING
            self._settling = not relaunch
        if relaunch:
            time.sleep(2 * CHILD_WATCHDOG_SECS)  # the lost attempt's processes end (see _all_gone)
            with self.lock:
                self._settling = self.state is RunState.STOPPING
                if not self._settling:
                    run.lifecycle.attempt += 1
                    self.coord = self._coordinator(run.attempt)
                    self._ending_since = self._foreground_done_at = None
                    run.lifecycle.transition(RunState.RESERVING)
                    return True
        self._settle(job.error, coord)
        return False

    def _wait_for_slots(self, deadline: Deadline) -> bool:
        """Hold the attempt back until the cluster has a free task slot for each node: a barrier
        job that cannot be scheduled is never handed to Spark (it would retry it for about 10
        minutes, the run stuck in ``reserving``). Meanwhile a ``waiting_for_slots`` finding says
        what holds them; a blocker (executors came, and too few) or ``deadline`` fails the run.
        Where the backend only estimates its view (Spark Connect) the gang is submitted at once and
        ``gang_not_started`` speaks for it. A cluster that cannot be read (the SparkContext stopped
        under the run) fails it. Whether to submit (False: stopped or failed)."""
        run, n = self.run, len(self.run.roles)
        last_diagnosis = -1.0
        while self.state is RunState.RESERVING:
            try:
                view = run.backend.cluster(run.job_group)
            except Exception as e:  # the SparkContext was stopped under the run, or its JVM is gone
                self.abort(SparkJobError(f"run {run.name} cannot read the cluster's free slots: {error_summary(e)}"))
                break
            if not view.exact or view.free_slots >= n:
                return True
            if deadline.expired or time.monotonic() - last_diagnosis >= 1.0:
                last_diagnosis = time.monotonic()
                findings = run.diagnosis.waiting_for_slots(run.job_group, run.reservation_timeout)
                run.diagnosis.publish(findings)
                if blockers(findings):
                    self.abort(PreflightError(f"cannot launch {n} nodes:", blockers(findings)))
                elif deadline.expired:
                    self.abort(ReservationTimeout(
                        f"run {run.name}: waited {run.reservation_timeout:.0f}s for {n} free task slots, "
                        f"{view.free_slots} free", findings))
            deadline.sleep(WATCH_INTERVAL)
        return False

    def _watch(self, job: SparkJob, coord: Coordinator, deadline: Deadline) -> None:
        """Until the attempt's job ends: diagnose a stalled reservation, fail it at ``deadline``,
        stop background nodes after the training nodes, cancel a job that outlives its end."""
        run = self.run
        count, last_change, last_diagnosis = 0, time.monotonic(), 0.0
        cancelled = background_stopped = False
        while not job.join(min(WATCH_INTERVAL, deadline.remaining()) if self.state is RunState.RESERVING
                           else WATCH_INTERVAL):
            now, state = time.monotonic(), self.state
            if state is RunState.RESERVING:
                registered = coord.registered()
                if deadline.expired:
                    self._reservation_timeout(coord, now - last_change)
                elif len(registered) != count:
                    count, last_change = len(registered), now
                elif now - last_change >= run.stall_secs and now - last_diagnosis >= 1.0:
                    last_diagnosis = now
                    run.diagnosis.publish(run.diagnosis.live(run.job_group, registered, now - last_change))
            elif state.ending and not cancelled and self._ending_since is not None \
                    and now - self._ending_since >= run.stop_grace_secs + CANCEL_MARGIN:
                cancelled = True
                job.cancel()
            done_at = self._foreground_done_at
            if done_at is not None and not background_stopped and now - done_at >= run.background_grace_secs:
                background_stopped = True
                coord.broadcast(m.Stop(), BACKGROUND_ROLES)
            self.heartbeat.tick(coord, now, self.state.ending)
        self.heartbeat.release()

    def _reservation_timeout(self, coord: Coordinator, stalled_for: float) -> None:
        run = self.run
        registered, missing = coord.registered(), coord.missing()
        findings = run.diagnosis.live(run.job_group, registered, stalled_for)
        findings = blockers(findings) or findings or [Finding(
            code="reservation_timeout",
            cause=f"{len(missing)} of {len(run.roles)} nodes did not register within {run.reservation_timeout:.0f}s",
            evidence=(f"registered: {registered}", f"missing: {missing}"),
            remedy="check the executors' stderr for errors, or raise reservation_timeout",
        )]
        run.diagnosis.publish(findings)
        self.abort(ReservationTimeout(f"run {run.name}: waited {run.reservation_timeout:.0f}s for "
                                      f"{len(run.roles)} reservations, got {len(registered)}", findings))

    def _all_gone(self, conns: list) -> bool:
        """Wait (bounded) until the nodes behind ``conns`` are gone. Before a relaunch their child
        processes get ``2 * CHILD_WATCHDOG_SECS`` more: they kill themselves that long after their
        node ends, possibly on other hosts where nothing but time says they are gone; nodes of the
        next attempt on the same host also kill what is left (``orphans.kill_attempts_before``), so
        that no process of the lost attempt writes beside the next one."""
        return Deadline(self.run.stop_grace_secs + 5.0).wait_until(
            lambda: all(c.attrs.get("gone") for c in conns), interval=0.01)

    def _settle(self, failure: BaseException | None, coord: Coordinator) -> None:
        """End the run after its last job: close the control server, then the terminal transition."""
        run = self.run
        run.release()
        with self.lock:
            state = self.state
            if state is RunState.STOPPING:
                run.lifecycle.transition(RunState.STOPPED, RunStopped(f"run {run.name} was stopped"))
            elif state is RunState.FAILING:
                run.lifecycle.transition(RunState.FAILED)
            elif failure is not None:
                findings = blockers(run.diagnosis.live(run.job_group, coord.registered()))
                run.diagnosis.publish(findings)
                run.lifecycle.transition(RunState.FAILED, SparkJobError(
                    f"the Spark job of run {run.name} failed: {error_summary(failure)}", findings))
            elif any(nd.state is not NodeState.FINISHED for nd in coord.nodes):
                missing = [nd.name for nd in coord.nodes if nd.state is not NodeState.FINISHED]
                run.lifecycle.transition(RunState.FAILED,
                                         SparkJobError(f"nodes {missing} ended without reporting a result"))
            else:
                run.lifecycle.transition(RunState.FINISHED)

    # -- ending an attempt ---------------------------------------------------------------------
    def abort(self, error: NodeError | LaunchError, retryable: bool = False) -> None:
        """End this attempt: tell every node to stop; the job is cancelled if it lingers. A lost
        node (``retryable``) with retries left relaunches; anything else fails the run."""
        run = self.run
        with self.lock:
            if self.state.ending:
                return  # the first outcome stands
            if retryable and run.attempt < run.retries:
                run.diagnosis.publish([Finding(
                    code="node_lost_retrying",
                    cause=f"a node was lost; relaunching the run (attempt {run.attempt + 2} of {run.retries + 1})",
                    evidence=(str(error).splitlines()[0],),
                    remedy="nothing to do if the nodes resume from their checkpoints (ctx.restore() or "
                           "ctx.callbacks()); otherwise training restarts from scratch",
                    severity="warning",
                )])
                run.lifecycle.transition(RunState.RELAUNCHING)
            else:
                if retryable and run.retries:
                    error = NodeError(error.role, error.index, error.host,
                                      f"{error.traceback_text}\n(after {run.attempt + 1} attempts; retries={run.retries})",
                                      error.exit_code, error.findings)
                run.lifecycle.transition(RunState.FAILING, error)
            self._ending_since = time.monotonic()
        self.coord.broadcast(m.Stop())

    def request_stop(self) -> None:
        """Stop the run (``Run.stop``): unless it is already ending, every node is told to stop."""
        with self.lock:
            if self.ending():
                return
            self.run.lifecycle.transition(RunState.STOPPING)
            self._ending_since = time.monotonic()
        self.coord.broadcast(m.Stop())

    # -- the coordinator's hooks (called with the run's lock held) --------------------------------
    def cluster_ready(self, spec: dict[str, list[str]]) -> bool:
        return self.run.lifecycle.try_transition(RunState.RUNNING)

    def node_failed(self, error: NodeError, retryable: bool) -> None:
        if not retryable and not self.state.ending and self.heartbeat.hold(error, self.coord):
            return  # is a peer's host cut off? (see heartbeat.py)
        self.abort(error, retryable)

    def ending(self) -> bool:
        return self.state.ending or self._settling

    def foreground_done(self) -> None:
        self._foreground_done_at = time.monotonic()

    def findings(self, findings: list[Finding]) -> None:
        self.run.diagnosis.publish(findings)

    def leftovers(self, items: tuple[dict, ...]) -> None:
        self.run.diagnosis.add_leftovers(items)

    def versions(self, node: str, python: str, tensorflow: str) -> None:
        self.run.diagnosis.add_versions(node, python, tensorflow)

    def files(self, node_dir: str, chunks: list[Chunk]) -> dict[str, int] | None:
        sink = self.run.file_sink
        if sink is None:
            return None
        try:
            return sink(node_dir, chunks)
        except Exception:  # a failing sink loses TensorBoard bytes, never the run
            log.exception("run %s: the event-file sink failed for %s", self.run.name, node_dir)
            return None

    def model_dir_unseen(self, nodes: list[str]) -> None:
        self.run.diagnosis.publish([unshared_finding(self.run.model_dir, nodes)])
        self.run.events.publish(ModelDirUnshared(self.run.run_id, model_dir=self.run.model_dir, nodes=tuple(nodes)))

    def feed(self, node: NodeRecord, msg: m.Message) -> None:
        if self.run.feeder is None:
            raise ChannelError(f"{msg.TYPE!r} from {node.name}, but run {self.run.name} feeds no data")
        self.run.feeder.on_message(node, msg)
