"""The attempts of one run: each attempt's barrier job, its watch, and how the run ends.

A :class:`Supervisor` owns one thread per run, which submits an attempt's barrier job through the
Spark backend and watches it until it ends: it diagnoses a stalled reservation and fails it at the
timeout, stops ps / evaluator nodes once the training nodes are done, and cancels a job that
outlives its attempt's end by more than the stop grace, and turns an executor's decommission
notice into a checkpoint (``decommission.py``). It is also the coordinator's
:class:`~.coordinator.Hooks`: a node that fails or is lost ends the attempt (relaunching the run
while retries are left), so does the decommission checkpoint once saved (relaunching from it, at
the size the cluster still has: :meth:`Supervisor._resize`), and when the last job ends it settles
the run's outcome.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...host.filetail import Chunk
from ...host.timeouts import Deadline
from ...host.versions import tensorflow_too_old
from ...host.watchdog import WATCHDOG_SECS as CHILD_WATCHDOG_SECS
from ...wire import messages as m
from ...wire.plan import FOREGROUND_ROLES, node_name
from ...wire.states import NodeState
from ..diagnosis.memory import MEMORY_REMEDY
from ..diagnosis.nodes import unshared_finding
from ..errors import ChannelError, LaunchError, NodeError, RunStopped, SparkJobError
from ..events import AttemptEnded, LaunchSubmitted, ModelDirUnshared
from ..events.finding import Finding, blockers
from ..spark import SparkJob, error_summary
from .coordinator import BACKGROUND_ROLES, Coordinator
from .decommission import Decommission
from .heartbeat import Heartbeat
from .lifecycle import RunState
from .noderecord import NodeRecord
from .reservation import WATCH_INTERVAL, Reservation
from .supervised import AttemptLimits, FeedHandler, FileSink

if TYPE_CHECKING:
    from ...wire.channel import Connection
    from ..diagnosis.watch import LiveDiagnosis
    from ..events import EventStream
    from ..spark import SparkBackend
    from .lifecycle import Lifecycle

log = logging.getLogger(__name__)

CANCEL_MARGIN = 2.0  # seconds past the stop grace before an ending attempt's job is cancelled


class Supervisor:
    """The attempts of the run named ``name``; ``coord`` is the current attempt's coordinator.

    ``lock`` is the run's (``lifecycle.lock``), handed on to each attempt's coordinator and to the
    heartbeat: held here to decide how an attempt ends (stop, relaunch, settle: the state with
    ``_ending_since``, ``_settling`` and ``_relaunch_cause``), and held by the coordinator when it
    calls this supervisor's hooks.

    Args:
        lifecycle: the run's state (its id, its attempt and the lock every change holds).
        events, diagnosis, backend: the run's event stream, live diagnosis and Spark backend.
        limits: the run's :class:`~.supervised.AttemptLimits`, read as each attempt goes.
        job: ``job(attempt)`` is the body of that attempt's Spark job.
        release: frees what the run holds on the driver, once its last job ended.
        feeder: where the nodes' feed messages go (None: the run feeds no data).
        model_dir: the run's model directory, named by the finding of nodes that do not see it.
    """

    def __init__(self, name: str, roles: list[tuple[str, int]], *, lifecycle: Lifecycle, events: EventStream,
                 diagnosis: LiveDiagnosis, backend: SparkBackend, limits: AttemptLimits,
                 job: Callable[[int], Callable[[], Any]], release: Callable[[], None],
                 feeder: FeedHandler | None, model_dir: str | None) -> None:
        self.name, self.roles, self.run_id = name, roles, lifecycle.run_id
        self.lifecycle, self.events, self.diagnosis, self.backend = lifecycle, events, diagnosis, backend
        self.limits, self.job, self.release, self.feeder, self.model_dir = limits, job, release, feeder, model_dir
        self.lock = lifecycle.lock
        self.file_sink: FileSink | None = None  # see set_file_sink
        self.full_roles = list(roles)  # ``roles`` (the run's list, shared) is the current attempt's: see _resize
        self.coord, self.decommission = self._coordinator(0)
        self.thread: threading.Thread | None = None
        self._ending_since: float | None = None  # when the current attempt began to wind down
        self._foreground_done_at: float | None = None
        self._settling = False
        self._memory_failures: list[str] = []  # each attempt that ended because a node ran out of memory
        self._relaunch_cause: tuple[str, str, int | None] = ("lost", "", None)  # cause, detail, step: AttemptEnded
        self._decommission_readable = True
        self.heartbeat = Heartbeat(self.lock, diagnosis, self.abort)
        self.reservation = Reservation(name, roles, lifecycle=lifecycle, backend=backend, diagnosis=diagnosis,
                                       limits=limits, abort=self.abort)

    def _coordinator(self, attempt: int) -> tuple[Coordinator, Decommission]:
        coord = Coordinator(self.run_id, self.roles, attempt, self.events, self.lock, self)
        return coord, Decommission(coord, self.events, self.diagnosis.publish, self.decommissioned)

    @property
    def state(self) -> RunState:
        return self.lifecycle.state

    def start(self) -> None:
        self.thread = self.backend.job_thread(self._attempts, name=f"tfos-run-{self.run_id}")
        self.thread.start()

    def set_file_sink(self, sink: FileSink | None) -> None:
        """Receive the event-file bytes that nodes ship from node-local log directories
        (``file_sink`` is the current receiver).

        ``sink(node_dir, chunks)`` is called on a connection thread with the node's subdirectory
        name (``chief_0``...) and a list of ``Chunk(relpath, offset, data)``; it returns
        ``{relpath: offset}`` for files whose bytes before ``offset`` it lacks, which that node then
        sends again. Setting a sink mid-run asks every node to resend its files from the start (a
        sink keeps only the bytes it lacks). Without a sink, shipped bytes are dropped.
        """
        self.file_sink = sink
        if sink is not None:
            self.coord.broadcast(m.FilesResend())

    def tell(self, nodes: list[str], msg: m.Message) -> None:
        """Send ``msg`` to the running nodes named ``nodes`` (``role:index``)."""
        self.coord.tell(nodes, msg)

    # -- the control channel (the run's ControlPlane hands its connections here) ------------------
    def on_message(self, conn: Connection, raw: dict) -> None:
        self.coord.handle(conn, m.decode(raw))

    def on_close(self, conn: Connection) -> None:
        self.coord.closed(conn)

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
        if coord.attempt:
            self._resize()
            self.coord, self.decommission = self._coordinator(coord.attempt)  # of the size chosen
            coord = self.coord
        n, tag = len(self.roles), self.lifecycle.job_group
        deadline = Deadline(self.limits.reservation_timeout)  # free slots, then every node registered
        if not self.reservation.wait_for_slots(deadline):
            self._settle(None, coord)
            return False
        self.events.publish(LaunchSubmitted(self.run_id, num_tasks=n, roles=tuple(nd.name for nd in coord.nodes),
                                            attempt=coord.attempt))
        body = self.job(coord.attempt)
        job = self.backend.submit(tag, f"tfos_notebook run {self.name} attempt {coord.attempt}", body)
        self._watch(job, coord, deadline)
        # The nodes' connections close after their last message (the result): once they are all
        # gone, every result has been handled and the attempt's outcome is known.
        if job.error is not None:
            coord.broadcast(m.Stop(stacks=True))  # the job failed under them: nodes still running must end
        self._all_gone(coord.connections())
        with self.lock:
            relaunch = self.state is RunState.RELAUNCHING
            self._settling = not relaunch
        if relaunch:
            time.sleep(2 * CHILD_WATCHDOG_SECS)  # the lost attempt's processes end (see _all_gone)
            with self.lock:
                self._settling = self.state is RunState.STOPPING
                if not self._settling:
                    cause, detail, step = self._relaunch_cause
                    self.events.publish(AttemptEnded(self.run_id, attempt=coord.attempt, workers=_trainers(self.roles),
                                                     cause=cause, detail=detail, step=step))
                    self.coord, self.decommission = self._coordinator(self.lifecycle.attempt + 1)
                    self._ending_since = self._foreground_done_at = None
                    self.lifecycle.relaunch()
                    return True
        self._settle(job.error, coord)
        return False

    def _watch(self, job: SparkJob, coord: Coordinator, deadline: Deadline) -> None:
        """Until the attempt's job ends: diagnose a stalled reservation, fail it at ``deadline``,
        stop background nodes after the training nodes, cancel a job that outlives its end."""
        limits, registrations = self.limits, self.reservation.registrations(coord, deadline)
        cancelled = background_stopped = False
        while not job.join(min(WATCH_INTERVAL, deadline.remaining()) if self.state is RunState.RESERVING
                           else WATCH_INTERVAL):
            now, state = time.monotonic(), self.state
            if state is RunState.RESERVING:
                registrations.tick(now)
            elif state is RunState.RUNNING and self._decommission_readable:
                self._poll_decommission(now)
            elif state.ending and not cancelled and self._ending_since is not None \
                    and now - self._ending_since >= limits.stop_grace_secs + CANCEL_MARGIN:
                cancelled = True
                job.cancel()
            done_at = self._foreground_done_at
            if done_at is not None and not background_stopped and now - done_at >= limits.background_grace_secs:
                background_stopped = True
                coord.broadcast(m.Stop(), BACKGROUND_ROLES)
            self.heartbeat.tick(coord, now, self.state.ending)
        self.heartbeat.release()

    def _poll_decommission(self, now: float) -> None:
        try:
            self.decommission.poll(self.backend, now)
        except Exception as e:  # a Spark without the scheduler's decommission state, or its JVM gone
            self._decommission_readable = False
            log.warning("run %s: cannot read executors' decommission state (%s); a leaving executor is seen once "
                        "it is gone", self.name, error_summary(e))

    def _resize(self) -> None:
        """Before a relaunch: every node of the run when the cluster has their slots within
        ``replacement_grace`` (a replacement executor registered), else as many training nodes as
        the free slots hold, down to ``min_workers`` (the last workers are left out; below that the
        relaunch waits for slots as any reservation does, and fails at its timeout). Changes the
        run's ``roles`` in place: they are what the next attempt launches."""
        full, limits = self.full_roles, self.limits
        trainers = _trainers(full)
        floor = limits.min_workers or trainers
        view, deadline = None, Deadline(limits.replacement_grace)
        while floor < trainers and self.state is RunState.RESERVING:
            try:
                view = self.backend.cluster(self.lifecycle.job_group)
            except Exception:  # the reservation itself reports an unreadable cluster
                break
            if not view.exact or view.free_slots >= len(full) or deadline.expired:
                break
            deadline.sleep(WATCH_INTERVAL)
        fit = trainers if view is None or not view.exact or view.free_slots >= len(full) \
            else view.free_slots - (len(full) - trainers)
        keep = max(floor, fit)
        drop = trainers - keep
        self.roles[:] = full[:len(full) - drop] if drop else full
        if fit < floor:
            self.diagnosis.publish([Finding(
                code="below_min_workers",
                cause=f"run {self.name} cannot go on with {floor} training nodes (min_workers): the cluster has "
                      f"{view.free_slots} free task slots for its {len(full) - trainers + floor} nodes; the relaunch "
                      f"waits for them, up to its reservation_timeout ({limits.reservation_timeout:.0f}s)",
                evidence=(f"{view.free_slots} free task slots after {limits.replacement_grace:.0f}s",),
                remedy="add executors (or wait for the cluster's replacement), or lower min_workers",
                severity="warning")])
        elif drop:
            self.diagnosis.publish([Finding(
                code="run_resized",
                cause=f"relaunching run {self.name} with {keep} of its {trainers} training nodes: no replacement "
                      f"for the lost executor within {limits.replacement_grace:.0f}s",
                evidence=(f"{view.free_slots} free task slots" if view else "", f"min_workers={floor}"),
                remedy="nothing to do; a global batch stays global, a per-worker batch and a learning rate scaled "
                       "by the number of workers change with it (see docs/reliability.md)",
                severity="warning")])

    def _all_gone(self, conns: list) -> bool:
        """Wait (bounded) until the nodes behind ``conns`` are gone. Before a relaunch their child
        processes get ``2 * CHILD_WATCHDOG_SECS`` more: they kill themselves that long after their
        node ends, possibly on other hosts where nothing but time says they are gone; nodes of the
        next attempt on the same host also kill what is left (``orphans.kill_attempts_before``), so
        that no process of the lost attempt writes beside the next one."""
        return Deadline(self.limits.stop_grace_secs + 5.0).wait_until(
            lambda: all(c.attrs.get("gone") for c in conns), interval=0.01)

    def _settle(self, failure: BaseException | None, coord: Coordinator) -> None:
        """End the run after its last job: close the control server, then the terminal transition."""
        self.release()
        lifecycle = self.lifecycle
        with self.lock:
            state = self.state
            if state is RunState.STOPPING:
                lifecycle.transition(RunState.STOPPED, RunStopped(f"run {self.name} was stopped"))
            elif state is RunState.FAILING:
                lifecycle.transition(RunState.FAILED)
            elif failure is not None:
                findings = blockers(self.diagnosis.live(lifecycle.job_group, coord.registered()))
                self.diagnosis.publish(findings)
                lifecycle.transition(RunState.FAILED, SparkJobError(
                    f"the Spark job of run {self.name} failed: {error_summary(failure)}", findings))
            elif any(nd.state is not NodeState.FINISHED for nd in coord.nodes):
                missing = [nd.name for nd in coord.nodes if nd.state is not NodeState.FINISHED]
                lifecycle.transition(RunState.FAILED,
                                     SparkJobError(f"nodes {missing} ended without reporting a result"))
            else:
                lifecycle.transition(RunState.FINISHED)

    # -- ending an attempt ---------------------------------------------------------------------
    def abort(self, error: NodeError | LaunchError, retryable: bool = False) -> None:
        """End this attempt: tell every node to stop; the job is cancelled if it lingers. A lost
        node (``retryable``) with retries left relaunches; so does a node out of memory, once (the
        host may have been crowded by something else; a second time, the run's own memory is to
        blame); anything else fails the run."""
        with self.lock:
            attempt, retries = self.lifecycle.attempt, self.limits.retries
            if self.state.ending:
                return  # the first outcome stands
            if isinstance(error, NodeError) and error.cause == "memory":
                error, retryable = self._out_of_memory(error, attempt, retryable and attempt < retries)
            if retryable and attempt < retries:
                self._relaunch_cause = (error.cause if isinstance(error, NodeError) and error.cause else "lost",
                                        str(error).splitlines()[0], None)
                self.diagnosis.publish([Finding(
                    code="node_lost_retrying",
                    cause=f"a node was lost; relaunching the run (attempt {attempt + 2} of {retries + 1})",
                    evidence=(str(error).splitlines()[0],),
                    remedy="nothing to do if the nodes resume from their checkpoints (ctx.restore() or "
                           "ctx.callbacks()); otherwise training restarts from scratch",
                    severity="warning",
                )])
                self.lifecycle.transition(RunState.RELAUNCHING)
            else:
                if retryable and retries:
                    error = NodeError(error.role, error.index, error.host,
                                      f"{error.traceback_text}\n(after {attempt + 1} attempts; retries={retries})",
                                      error.exit_code, error.findings)
                self.lifecycle.transition(RunState.FAILING, error)
            self._ending_since = time.monotonic()
        # a node failed: where the others were goes to their logs (a launch that timed out: no function ran)
        self.coord.broadcast(m.Stop(stacks=isinstance(error, NodeError)))

    def _out_of_memory(self, error: NodeError, attempt: int, relaunch: bool) -> tuple[NodeError, bool]:
        """A node of ``attempt`` ran out of memory: the finding that says so, and whether the run
        relaunches (once: not when an earlier attempt ended so too). Returns the error the run
        fails with, should it, and whether it is retried."""
        lines = error.traceback_text.strip().splitlines()  # the guard's reason first, else a traceback's last line
        why = lines[0] if lines and lines[0].startswith("MemoryError:") else lines[-1] if lines else "out of memory"
        self._memory_failures.append(f"attempt {attempt + 1}: {node_name(error.role, error.index)} on {error.host}: "
                                     f"{why}")
        again = len(self._memory_failures) > 1
        relaunch = relaunch and not again
        self.diagnosis.publish([Finding(
            code="node_out_of_memory",
            cause=f"{node_name(error.role, error.index)} ran out of memory"
                  + ("; relaunching the run once" if relaunch else
                     ", again: not relaunched, it would run out the same way" if again else ""),
            evidence=tuple(self._memory_failures), remedy=MEMORY_REMEDY,
            severity="warning" if relaunch else "blocker")])
        if again:
            error = NodeError(error.role, error.index, error.host,
                              error.traceback_text + "\nout of memory in each attempt:\n  "
                              + "\n  ".join(self._memory_failures), error.exit_code, error.findings, error.cause)
        return error, relaunch

    def decommissioned(self, step: int, path: str, secs: float) -> None:
        """Every training node saved the decommission checkpoint at ``step``: end this attempt and
        relaunch from it (called with the run's lock held). Not counted against ``retries``: the
        cluster took the executor, the run lost nothing."""
        if self.state.ending:
            return
        self._relaunch_cause = ("decommission", f"{self.decommission.notice}; checkpoint at step {step} "
                                                f"{secs:.1f}s after the notice", step)
        self.diagnosis.publish([Finding(
            code="decommission_checkpoint",
            cause=f"the nodes saved a checkpoint at step {step}, {secs:.1f}s after the notice; relaunching run "
                  f"{self.name} from it",
            evidence=(self.decommission.notice, path), remedy="nothing to do", severity="warning")])
        self.lifecycle.transition(RunState.RELAUNCHING)
        self._ending_since = time.monotonic()
        # the nodes that saved end by themselves; a stop meeting one in its exit would wait out the
        # grace (TensorFlow catches SIGTERM under a multi-worker strategy): only the others are stopped
        self.coord.tell([nd.name for nd in self.coord.nodes if nd.name not in self.decommission.saves], m.Stop())

    def savepoint(self, node: NodeRecord, msg: m.Message) -> None:
        self.decommission.handle(node, msg)

    def request_stop(self) -> None:
        """Stop the run (``Run.stop``): unless it is already ending, every node is told to stop."""
        with self.lock:
            if self.ending():
                return
            self.lifecycle.transition(RunState.STOPPING)
            self._ending_since = time.monotonic()
        self.coord.broadcast(m.Stop())

    # -- the coordinator's hooks (called with the run's lock held) --------------------------------
    def cluster_ready(self, spec: dict[str, list[str]]) -> bool:
        return self.lifecycle.try_transition(RunState.RUNNING)

    def node_failed(self, error: NodeError, retryable: bool) -> None:
        if not retryable and not self.state.ending and self.heartbeat.hold(error, self.coord):
            return  # is a peer's host cut off? (see heartbeat.py)
        self.abort(error, retryable)

    def ending(self) -> bool:
        return self.state.ending or self._settling

    def foreground_done(self) -> None:
        self._foreground_done_at = time.monotonic()

    def findings(self, findings: list[Finding]) -> None:
        self.diagnosis.publish(findings)

    def leftovers(self, items: tuple[dict, ...]) -> None:
        self.diagnosis.add_leftovers(items)

    def versions(self, node: NodeRecord, python: str, tensorflow: str) -> None:
        self.diagnosis.add_versions(node.name, python, tensorflow)
        too_old = tensorflow_too_old(tensorflow)
        if too_old:  # at once, before any function runs; not retried: every host has the same install
            self.abort(NodeError(node.role, node.index, node.where, f"{too_old} (found on {node.where})"))

    def files(self, node_dir: str, chunks: list[Chunk]) -> dict[str, int] | None:
        sink = self.file_sink
        if sink is None:
            return None
        try:
            return sink(node_dir, chunks)
        except Exception:  # a failing sink loses TensorBoard bytes, never the run
            log.exception("run %s: the event-file sink failed for %s", self.name, node_dir)
            return None

    def model_dir_unseen(self, nodes: list[str]) -> None:
        self.diagnosis.publish([unshared_finding(self.model_dir, nodes)])
        self.events.publish(ModelDirUnshared(self.run_id, model_dir=self.model_dir, nodes=tuple(nodes)))

    def feed(self, node: NodeRecord, msg: m.Message) -> None:
        if self.feeder is None:
            raise ChannelError(f"{msg.TYPE!r} from {node.name}, but run {self.name} feeds no data")
        self.feeder.on_message(node, msg)


def _trainers(roles: list[tuple[str, int]]) -> int:
    """The training nodes (chief and workers) among ``roles``."""
    return sum(1 for role, _ in roles if role in FOREGROUND_ROLES)
