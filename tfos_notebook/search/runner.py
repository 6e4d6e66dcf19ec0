"""A sweep: the trials of a search, each a distributed run (a gang of ``workers`` nodes), as many
at once as the cluster's slots hold.

``Sweep(sc, fn, space, trials=..., parallel=..., workers=...).start()`` opens (or resumes) the
Optuna study and launches the first trial on the caller's thread, so a trial that cannot fit the
cluster is refused at once by its run's pre-flight; then one thread of the sweep's own asks
Optuna for the next trials, launches each as a :class:`~..tracking.run.TrackedRun` whose
``args`` carry the trial's parameters, feeds the chief's reported metric to the pruner, stops a
pruned trial's run at once (its nodes get ``stop_grace_secs`` to leave) and tells Optuna how each
trial ended. A trial that fails is recorded with its error and the sweep goes on; only a function
that never reports the metric, or launches that keep failing, end it early. Every Optuna call is
made on that one thread; the runs' event streams only queue for it.
"""

from __future__ import annotations

import inspect
import logging
import math
import queue
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from ..errors import ConfigError
from ..runtime.driver.errors import LaunchError, NodeError
from ..runtime.driver.events import ClusterReady, EventStream, FindingRaised, RunFinished, Step
from ..runtime.driver.events.finding import WARNING, Finding
from ..runtime.driver.spark import backend_for
from ..runtime.wire.plan import chief_of
from ..tracking.run import TrackedRun
from ..tracking.settings import resolve as resolve_tracking
from .events import SweepFinished, SweepStarted, TrialEnded, TrialPruned, TrialReported, TrialStarted, tally
from .space import parse_space
from .study import (
    RESUMES,
    STOPPED,
    earlier_ends,
    enqueue_grid,
    make_pruner,
    make_sampler,
    open_study,
    requeue_interrupted,
    require_optuna,
)

log = logging.getLogger(__name__)

DIRECTIONS = ("minimize", "maximize")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
STOP_SECS = 60.0  # how long a stopped trial's run may take to end before its stop gives up (and says so)
LAUNCH_FAILURES = 3  # trials in a row ending before their cluster formed (pre-flight, reservation) end the sweep
#: ``Run`` options a sweep hands to every trial's run as they are.
RUN_OPTIONS = frozenset(inspect.signature(TrackedRun.__init__).parameters) - {
    "self", "sc", "main_fun", "args", "num_nodes", "log_dir", "model_dir", "name", "mlflow", "stop_grace_secs"}


@dataclass
class Trial:
    """One trial as the sweep's thread keeps it."""

    number: int
    params: dict[str, Any]
    run: TrackedRun
    optuna_trial: Any
    state: str = "running"
    step: int = 0
    value: float | None = None
    reported_step: int = -1
    seen: set[str] = field(default_factory=set)  # metric names the chief reported
    pruned_at: float | None = None
    stop_asked: bool = False


class Sweep:
    """A search over ``space`` whose trials are distributed runs of ``fn``.

    Args:
        sc: the SparkContext or SparkSession (never stopped here).
        fn: ``fn(args, ctx)``, run on every node of every trial; ``args`` holds ``args`` (the
            base arguments) with the trial's parameters set on it, plus ``args.trial`` (its
            number) and ``args.sweep`` (the sweep's name). The chief reports the metric with
            ``ctx.report(step, **{metric: value})`` (``ctx.callbacks()`` reports Keras's epoch
            logs so), or returns a dict holding it (its final value).
        space: the search space (``space.py``). trials: how many trials count (finished, pruned
            or failed); a resumed sweep runs what is left.
        parallel: most trials at once (None: as many as the cluster's task slots hold, each
            trial's nodes taking one slot each). workers: each trial's training nodes.
        metric, direction: what the chief reports, and ``minimize`` or ``maximize``.
        sampler: ``tpe`` (Optuna's default), ``random``, ``grid`` or an Optuna sampler; seed: its seed.
        pruner: ``median``, ``asha``, ``none`` or an Optuna pruner.
        name: the sweep's name and its study's; starting a sweep of a name its storage holds resumes it.
        storage: the Optuna storage (default: an SQLite file under the state directory).
        args: base arguments (a dict or a namespace) every trial gets.
        log_dir, model_dir: each trial's run writes under ``<dir>/trial-NNN``.
        mlflow: as for ``Run``; with MLflow the sweep is one parent run and each trial a child run.
        data, epochs: fed to every trial in-stage (``input_mode="spark"``), as ``Run.start`` does.
        stop_grace_secs: seconds a stopped or pruned trial's nodes get to leave before they are killed.
        on_trial: called with each trial's run and number before it starts.
        run_options: any other ``Run`` option (``gpus_per_node``, ``reservation_timeout``, ``env``...).
    """

    def __init__(self, sc, fn: Callable, space: Mapping[str, Any], *, trials: int, parallel: int | None = None,
                 workers: int = 2, metric: str = "loss", direction: str = "minimize", sampler: Any = "tpe",
                 pruner: Any = "median", seed: int | None = None, name: str | None = None, storage: Any = None,
                 args: Any = None, log_dir: str | None = None, model_dir: str | None = None,
                 mlflow: bool | str | None = None, data: Any = None, epochs: int = 1, stop_grace_secs: float = 1.0,
                 on_trial: Callable[[TrackedRun, int], None] | None = None, **run_options: Any) -> None:
        if not callable(fn):
            raise ConfigError(f"the trial function must take (args, ctx), got {type(fn).__name__}")
        for what, value, low in (("trials", trials, 1), ("workers", workers, 1), ("parallel", parallel, 1)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
                raise ConfigError(f"{what} must be a whole number of at least {low}, got {value!r}")
        if not isinstance(metric, str) or not metric.isidentifier():
            raise ConfigError(f"metric must be the name the chief reports (ctx.report(step, {metric}=...)), "
                              f"a Python identifier, got {metric!r}")
        if direction not in DIRECTIONS:
            raise ConfigError(f"direction must be 'minimize' or 'maximize', got {direction!r}")
        unknown = sorted(set(run_options) - RUN_OPTIONS)
        if unknown:
            raise ConfigError(f"unknown option {unknown[0]!r} for the trials' runs; known: {', '.join(sorted(RUN_OPTIONS))}")
        require_optuna()
        self.space = parse_space(space)
        self.sampler, self.seed = make_sampler(sampler, self.space, seed), seed
        self.pruner = make_pruner(pruner)
        self.sampler_name = sampler if isinstance(sampler, str) else type(sampler).__name__
        self.pruner_name = pruner if isinstance(pruner, str) else type(pruner).__name__
        if sampler == "grid" and trials > self.space.grid_size():
            raise ConfigError(f"trials={trials} but the grid has {self.space.grid_size()} points; ask for at most "
                              f"{self.space.grid_size()} trials, or add values")
        self.sc, self.fn = sc, fn
        self.trials, self.parallel, self.workers = trials, parallel, workers
        self.metric, self.direction = metric, direction
        self.sweep_id = time.strftime("sweep-%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        self.name = name or self.sweep_id
        if not NAME.fullmatch(self.name):
            raise ConfigError(f"name {self.name!r}: a sweep's name names its study and folders, so it may hold only "
                              "letters, digits, '.', '_' and '-'")
        self.storage = storage
        self.base_args = _as_dict(args)
        self.log_dir, self.model_dir = log_dir, model_dir
        self.data, self.epochs = data, epochs
        self.stop_grace_secs = stop_grace_secs
        self.run_options = run_options
        self.on_trial = on_trial
        self.num_nodes = workers + run_options.get("num_ps", 0) + (1 if run_options.get("eval_node") else 0)
        self.backend = backend_for(sc)
        where = self.backend.databricks()
        self.tracking_config = resolve_tracking(mlflow, where is not None and where.autologs_by_default,
                                                self.backend.conf)
        self.parent = None  # the MLflow parent run (mlflowparent.py)
        self.events = EventStream()
        self.study: Any = None
        self.state = "new"
        self.error: BaseException | None = None
        self.live: dict[int, Trial] = {}
        self.ended: list[TrialEnded] = []  # every trial that counts, a resumed sweep's earlier ones first
        self._queue: queue.Queue = queue.Queue()
        self._stopping = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"tfos-sweep-{self.name}")
        self._metric_seen = False
        self._slots, self._slots_read_at = 0, -1.0
        self._failures_in_a_row = 0

    # -- start, stop, wait -------------------------------------------------------------------------
    def start(self) -> Sweep:
        """Open (or resume) the study and launch the first trial here, then the rest in the background.

        Raises:
            ConfigError: the stored study optimizes the other way; PreflightError: a trial cannot
            fit the cluster (nothing was launched).
        """
        if self.state != "new":
            raise ConfigError(f"sweep {self.name} was already started; create a new Sweep (the same name resumes it)")
        self.study = open_study(self.name, self.storage, self.direction, self.sampler, self.pruner)
        requeued = requeue_interrupted(self.study)
        self.ended = earlier_ends(self.study, self.sweep_id)
        if self.sampler_name == "grid":
            enqueue_grid(self.study, self.space, self.seed)
        self.state = "running"
        if self.tracking_config is not None:
            from .mlflowparent import SweepParent

            self.parent = SweepParent(self, self.tracking_config).start()
        self.events.publish(SweepStarted(
            self.sweep_id, name=self.name, trials=self.trials, parallel=self.parallel or 0, workers=self.workers,
            metric=self.metric, direction=self.direction, sampler=str(self.sampler_name), pruner=str(self.pruner_name),
            space=self.space.describe(), done=len(self.ended), requeued=tuple(requeued)))
        for ended in self.ended:
            self.events.publish(ended)
        if self._to_start() > 0:
            try:
                self._launch(first=True)
            except BaseException as e:
                self._finish("failed", e)
                raise
        self._thread.start()
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the sweep: no trial starts, the running ones are stopped (and run again, with the same
        parameters, when the sweep resumes). Returns once every trial's run ended."""
        self._stopping.set()
        self._queue.put(("wake",))
        if self._thread.is_alive():
            self._thread.join(timeout)
        elif self.state == "running":
            self._finish("stopped", None)
        if not self._done.is_set():
            raise TimeoutError(f"sweep {self.name} did not stop within {timeout:.0f}s")

    def wait(self, timeout: float | None = None) -> dict[str, Any] | None:
        """Block until the sweep ends; returns the best trial (``best``). Raises why it failed."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"sweep {self.name} still running after {timeout}s")
        if self.error is not None:
            raise self.error
        return self.best

    def wait_ended(self, timeout: float | None = None) -> bool:
        """Whether the sweep ended within ``timeout`` seconds (its error, if any, is ``wait``'s to raise)."""
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def best(self) -> dict[str, Any] | None:
        """The best finished trial so far: ``number``, ``value``, ``params``; None before one finished."""
        _, best = tally(self.ended, self.direction)
        return None if best is None else {"number": best.number, "value": best.value, "params": best.params}

    # -- the sweep's thread -------------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            while True:
                if self._stopping.is_set():
                    self._stop_live()
                else:
                    self._fill()
                if not self.live and (self._stopping.is_set() or self._to_start() <= 0):
                    break
                try:
                    item = self._queue.get(timeout=0.5)
                except queue.Empty:
                    continue
                if item[0] == "step":
                    self._on_step(*item[1:])
                elif item[0] == "end":
                    self._on_end(*item[1:])
        except BaseException as e:  # a bug here must not leave trials running unseen
            log.exception("sweep %s failed", self.name)
            self.error = e
            self._stopping.set()
            for trial in list(self.live.values()):
                _stop_quietly(trial.run, STOP_SECS)
        self._finish("stopped" if self._stopping.is_set() and self.error is None else
                     "failed" if self.error is not None else "finished", self.error)

    def _to_start(self) -> int:
        return self.trials - sum(1 for e in self.ended if e.state != "stopped") - len(self.live)

    def _capacity(self) -> int:
        """Trials at once: ``parallel``, or as many as the cluster's task slots hold (at least one),
        the slots read at most once a second."""
        if self.parallel is not None and len(self.live) >= self.parallel:
            return self.parallel
        now = time.monotonic()
        if now - self._slots_read_at >= 1.0:
            self._slots_read_at = now
            try:
                self._slots = self.backend.cluster().total_slots
            except Exception:  # the view failed: one at a time, the runs' reservations still wait for slots
                self._slots = 0
        fits = max(1, self._slots // self.num_nodes)
        return min(self.parallel, fits) if self.parallel else fits

    def _fill(self) -> None:
        while self._to_start() > 0 and len(self.live) < self._capacity() and not self._stopping.is_set():
            try:
                self._launch()
            except LaunchError:  # its run's end is queued: _on_end records it and counts the failure
                pass

    def _stop_live(self) -> None:
        for trial in list(self.live.values()):
            self._ask_stop(trial)

    def _ask_stop(self, trial: Trial) -> None:
        """Stop ``trial``'s run, once, on a thread of its own (a stop waits for the run's end)."""
        if trial.stop_asked:
            return
        trial.stop_asked = True
        threading.Thread(target=_stop_quietly, args=(trial.run, STOP_SECS), daemon=True,
                         name=f"tfos-stop-{trial.run.run_id}").start()

    def _launch(self, first: bool = False) -> None:
        trial = self.study.ask(self.space.distributions)
        params = {**self.space.fixed, **trial.params}
        label = trial_label(trial.number)
        args = SimpleNamespace(**{**self.base_args, **params, "trial": trial.number, "sweep": self.name})
        try:
            run = TrackedRun(self.sc, self.fn, args, self.num_nodes, name=f"{self.name}/{label}",
                             log_dir=_under(self.log_dir, label), model_dir=_under(self.model_dir, label),
                             mlflow=self.parent.child_config() if self.parent is not None else False,
                             stop_grace_secs=self.stop_grace_secs, **self.run_options)
        except BaseException:
            self._interrupted(trial)
            raise
        record = Trial(trial.number, params, run, trial)
        trial.set_user_attr("tfos_run_id", run.run_id)
        if self.on_trial is not None:
            self.on_trial(run, trial.number)
        chief = chief_of(run.roles)

        def on_event(event: Any) -> None:  # on the publishing thread: only queue
            if isinstance(event, Step) and (event.role, event.index) == chief:
                self._queue.put(("step", record, event.step, event.metrics))
            elif isinstance(event, RunFinished):
                self._queue.put(("end", record, event))

        self.live[trial.number] = record
        run.events.subscribe(on_event)
        self.events.publish(TrialStarted(self.sweep_id, number=trial.number, params=params, trial_run_id=run.run_id,
                                         trial_name=run.name, resumes=trial.user_attrs.get(RESUMES)))
        try:
            run.start(self.data, self.epochs)
        except BaseException:
            if first:  # refused before anything ran: the caller hears why; a resume asks it again
                self.live.pop(trial.number, None)
                self._interrupted(trial)
            raise

    def _interrupted(self, trial: Any) -> None:
        """``trial`` ends without having run (or was stopped with the sweep): asked again on resume."""
        trial.set_user_attr(STOPPED, True)
        self.study.tell(trial, state=_state("FAIL"))

    def _on_step(self, trial: Trial, step: int, metrics: dict[str, float]) -> None:
        trial.seen.update(metrics)
        if trial.state != "running" or trial.pruned_at is not None:
            return
        if self.metric not in metrics:
            if not self._metric_seen and len(trial.seen) == len(metrics):  # its first report: say so at once
                self.events.publish(FindingRaised(self.sweep_id, finding=self._missing_metric(trial, WARNING)))
            return
        self._metric_seen = True
        value = float(metrics[self.metric])
        trial.step, trial.value = step, value
        self.events.publish(TrialReported(self.sweep_id, number=trial.number, step=step, value=value))
        if step <= trial.reported_step:
            return
        trial.reported_step = step
        trial.optuna_trial.report(value, step)
        if trial.optuna_trial.should_prune() and not self._stopping.is_set():
            trial.pruned_at = time.monotonic()
            self.events.publish(TrialPruned(self.sweep_id, number=trial.number, step=step, value=value))
            self._ask_stop(trial)

    def _on_end(self, trial: Trial, finished: RunFinished) -> None:
        run, study = trial.run, self.study
        error, stop_secs = "", 0.0
        if trial.pruned_at is not None:
            state, stop_secs = "pruned", time.monotonic() - trial.pruned_at
            study.tell(trial.optuna_trial, state=_state("PRUNED"))
        elif finished.state == "stopped" and self._stopping.is_set():
            state = "stopped"
            self._interrupted(trial.optuna_trial)
        elif finished.state == "finished":
            value = _returned(run.result, self.metric)
            trial.value = value if value is not None else trial.value
            if trial.value is None or not math.isfinite(trial.value):
                state = "failed"
                finding = self._missing_metric(trial) if trial.value is None else None
                error = (finding.describe(sep="; ") if finding is not None else
                         f"the metric {self.metric} ended as {trial.value}")
                trial.optuna_trial.set_user_attr("error", error)
                study.tell(trial.optuna_trial, state=_state("FAIL"))
                if finding is not None and not self._metric_seen:  # every trial would end so: stop here
                    self.error = ConfigError(f"sweep {self.name}: {finding.describe(sep='; ')}")
                    self._stopping.set()
            else:
                state = "complete"
                study.tell(trial.optuna_trial, trial.value)
        else:
            state = "failed"
            error = _why(run.error, finished.error or finished.state)
            trial.optuna_trial.set_user_attr("error", error)
            study.tell(trial.optuna_trial, state=_state("FAIL"))
        if run.events.events(ClusterReady):
            self._failures_in_a_row = 0
        elif state == "failed":
            self._failures_in_a_row += 1
        trial.state = state
        self.live.pop(trial.number, None)
        ended = TrialEnded(self.sweep_id, number=trial.number, state=state, value=trial.value, step=trial.step,
                           error=error, stop_secs=stop_secs, params=trial.params)
        self.ended.append(ended)
        self.events.publish(ended)
        if self._failures_in_a_row >= LAUNCH_FAILURES:
            raise LaunchError(f"sweep {self.name}: {LAUNCH_FAILURES} trials in a row ended before their nodes "
                              f"formed a cluster; the last: {error}")

    def _missing_metric(self, trial: Trial, severity: str = "blocker") -> Finding:
        seen = ", ".join(sorted(trial.seen)) or "nothing"
        return Finding(
            code="sweep_metric_missing", severity=severity, subject=f"trial {trial.number}",
            cause=f"trial {trial.number}'s chief reported {seen} but not the sweep's metric {self.metric}",
            evidence=(f"metric={self.metric!r}; reported: {seen}",),
            remedy=f"report it from the chief (ctx.report(step, {self.metric}=value), or ctx.callbacks() with "
                   f"Keras, whose epoch logs it sends), return {{{self.metric!r}: value}}, or give the sweep metric= one of: {seen}")

    def _finish(self, state: str, error: BaseException | None) -> None:
        self.state = state
        self.error = error
        best = self.best
        self.events.publish(SweepFinished(self.sweep_id, state=state, error=str(error or ""),
                                          best=best["number"] if best else -1,
                                          best_value=best["value"] if best else None))
        if self.parent is not None:
            self.parent.wait(30)
        self._done.set()


def trial_label(number: int) -> str:
    """Trial ``number``'s folder under the sweep's log and model dirs, and its TensorBoard runs' prefix."""
    return f"trial-{number:03d}"


def _as_dict(args: Any) -> dict[str, Any]:
    if args is None:
        return {}
    if isinstance(args, Mapping):
        return dict(args)
    if hasattr(args, "__dict__"):
        return dict(vars(args))
    raise ConfigError(f"args must be a dict or a namespace (argparse, SimpleNamespace), got {type(args).__name__}")


def _under(folder: str | None, label: str) -> str | None:
    return None if folder is None else f"{folder.rstrip('/')}/{label}"


def _returned(result: Any, metric: str) -> float | None:
    """The metric in what the chief returned, when it returned a dict holding it."""
    value = result.get(metric) if isinstance(result, Mapping) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _why(error: BaseException | None, fallback: str) -> str:
    """A trial's failure in one line: a node's exception after where it failed, else the error's first line."""
    if isinstance(error, NodeError):
        lines = [line.strip() for line in error.traceback_text.strip().splitlines() if line.strip()]
        head = str(error).splitlines()[0]
        return f"{head} {lines[-1]}"[:500] if lines else head[:500]
    text = str(error or fallback).strip()
    return text.splitlines()[0][:500] if text else fallback


def _state(name: str) -> Any:
    from optuna.trial import TrialState

    return TrialState[name]


def _stop_quietly(run: TrackedRun, timeout: float) -> None:
    try:
        run.stop(timeout)
    except Exception as e:  # noqa: BLE001 - stopping is best effort; the run's own end is what counts
        log.warning("run %s did not stop: %s", run.name, e)
