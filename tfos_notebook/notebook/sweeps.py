"""Sweeps from a notebook or a script: ``%%tfos_sweep`` and ``tfos_notebook.sweep(fn, space, ...)``.

The search itself is ``search/runner.py``'s :class:`~..search.runner.Sweep`; what this adds is for
the notebook: the sweep's monitor (a widget or text lines, ``sweepmonitor.py``), one TensorBoard
for the whole sweep (each trial a run under ``trial-NNN/``), the runs registry (the sweep a record
of kind ``sweep``, each trial a training record whose ``parent`` is the sweep, stop requests from
other kernels and the sidebar carried out), and ``%tfos_stop`` by the sweep's name.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, TFOSError
from ..runtime.driver.events import Event, MlflowRun, TensorBoardStarted
from ..runtime.host.paths import is_shared_logdir
from ..search.events import SweepFinished, TrialEnded, tally
from ..search.runner import Sweep, trial_label
from ..state import registry
from ..state.files import state_dir
from ..tensorboard.mirror import Mirror
from . import tracker
from .capture import capture_cell
from .frontend import OutputTarget, choose_monitor
from .pump import EventPump
from .session import notebook_spark
from .sweepmonitor import SweepMonitor, SweepTextMonitor, SweepView

if TYPE_CHECKING:
    from ..tensorboard import TensorBoardHandle
    from ..tracking.run import TrackedRun

log = logging.getLogger(__name__)

class SweepRun:
    """A sweep launched from a notebook or a script: the :class:`Sweep` plus its monitor, its
    TensorBoard and its registry record. ``wait()``, ``stop()``, ``state``, ``best``, ``trials``
    (each trial's run, by number), ``study`` (Optuna's), ``tensorboard_url``."""

    def __init__(self, sweep: Sweep, monitor: str = "text", target: OutputTarget | None = None,
                 tensorboard: bool = True) -> None:
        self.sweep = sweep
        self.target = target or OutputTarget()
        self.monitor: SweepMonitor | SweepTextMonitor | None = None
        if monitor == "widget":
            self.monitor = SweepMonitor(sweep.name, on_stop=self.stop)
        elif monitor == "text":
            self.monitor = SweepTextMonitor(sweep.name)
        self.trials: dict[int, TrackedRun] = {}
        self._trackers: list[tracker.RunTracker] = []
        self._lock = threading.Lock()
        self.mirror = Mirror(state_dir("mirrors", f"sweep-{sweep.name}")) if tensorboard else None
        self.tensorboard: TensorBoardHandle | None = None
        self._shared_sources: list[tuple[str, str]] = []  # (log dir, trial label) read from the driver
        sweep.on_trial = self._on_trial
        self._record = SweepRecord(sweep)
        self._pump = (EventPump(sweep.events, self.monitor.update, self.target, name=f"tfos-monitor-{sweep.sweep_id}")
                      if self.monitor is not None else None)

    # -- what the sweep calls ----------------------------------------------------------------------
    def _on_trial(self, run: TrackedRun, number: int) -> None:
        self.trials[number] = run
        self._trackers.append(tracker.track(run, on_stop=run.stop, parent=self.sweep.sweep_id))
        if self.mirror is None:
            return
        mirror, label = self.mirror, trial_label(number)
        run.set_file_sink(lambda node_dir, chunks: mirror.receive(f"{label}/{node_dir}", chunks))
        if is_shared_logdir(run.log_dir):
            with self._lock:
                self._shared_sources.append((run.log_dir, label))
                board = self.tensorboard
            if board is not None:
                board.add_source(run.log_dir, label)

    def start(self) -> SweepRun:
        """Start the sweep (see ``Sweep.start``) and its TensorBoard (in the background)."""
        if self.mirror is not None:
            threading.Thread(target=self._start_tensorboard, daemon=True,
                             name=f"tfos-tensorboard-{self.sweep.sweep_id}").start()
        try:
            self.sweep.start()
        finally:
            self._record.follow()
        return self

    def _start_tensorboard(self) -> None:
        from ..tensorboard import serve_logdir

        try:
            board = serve_logdir(self.mirror.root, self.sweep.sc)
        except Exception as e:  # the sweep goes on without it; the monitor says why
            note = f"TensorBoard did not start: {str(e).splitlines()[0]}"
            self.target.show(self.monitor, lambda m: m.tensorboard_note(note, error=True))
            return
        with self._lock:
            self.tensorboard = board
            sources = list(self._shared_sources)
        for logdir, label in sources:
            board.add_source(logdir, label)
        self.sweep.events.publish(TensorBoardStarted(self.sweep.sweep_id, url=board.url))
        self._record.update(tensorboard_port=board.port, tensorboard_url=board.url, mirror_dir=self.mirror.root)
        self.target.show(self.monitor, lambda m: m.show_tensorboard(board.url))

    # -- the user's side ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.sweep.name

    @property
    def run_id(self) -> str:
        return self.sweep.sweep_id

    @property
    def state(self) -> str:
        return self.sweep.state

    @property
    def done(self) -> bool:
        return self.sweep.done

    @property
    def best(self) -> dict[str, Any] | None:
        """The best finished trial: ``number``, ``value``, ``params``."""
        return self.sweep.best

    @property
    def study(self) -> Any:
        """The Optuna study (``study.trials_dataframe()``, ``optuna.visualization`` plots...)."""
        return self.sweep.study

    @property
    def tensorboard_url(self) -> str | None:
        return self.tensorboard.url if self.tensorboard is not None else None

    def wait(self, timeout: float | None = None) -> dict[str, Any] | None:
        """Block until the sweep ends; returns the best trial. Raises why the sweep failed."""
        with self.target.follow_caller():
            try:
                self.sweep.wait(timeout)
            except TFOSError:
                pass
            if self._pump is not None:
                self._pump.join(timeout=5)
        return self.sweep.wait(0)

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the sweep: no trial starts and the running ones stop; starting a sweep of the same
        name later resumes it, those trials first."""
        self.sweep.stop(timeout)

    def summary(self) -> str:
        view = SweepView(self.name)
        for e in self.sweep.events.events():
            view.apply(e)
        return view.headline()

    def __repr__(self) -> str:
        return f"<SweepRun {self.summary()}>"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        if isinstance(self.monitor, SweepMonitor):
            return self.monitor._repr_mimebundle_(**kwargs)
        return {"text/plain": self.summary()}


class SweepRecord:
    """The sweep's record in the runs registry (kind ``sweep``), kept from its events, and the stop
    requests other processes leave for it."""

    def __init__(self, sweep: Sweep) -> None:
        self.sweep = sweep
        self.record = tracker.owned_record(
            run_id=sweep.sweep_id, name=sweep.name, state="reserving", num_nodes=sweep.num_nodes, kind="sweep",
            log_dir=sweep.log_dir, model_dir=sweep.model_dir)
        self._lock = threading.Lock()
        registry.write_record(self.record)

    def follow(self) -> None:
        self.sweep.events.subscribe(self._on_event)
        threading.Thread(target=self._watch_stop_requests, daemon=True,
                         name=f"tfos-registry-{self.sweep.sweep_id}").start()

    def update(self, **changes: Any) -> None:
        with self._lock:
            self.record = replace(self.record, **changes)
            registry.write_record(self.record)

    def _on_event(self, e: Event) -> None:
        if isinstance(e, SweepFinished):
            self.update(state=e.state, ended_at=e.t, error=e.error.splitlines()[0] if e.error else None,
                        metrics=self._metrics())
        elif isinstance(e, TrialEnded):
            self.update(state="running", metrics=self._metrics())
        elif isinstance(e, MlflowRun):
            self.update(mlflow_run_id=e.mlflow_run_id or None, mlflow_url=e.url or None,
                        mlflow_tracking_uri=e.tracking_uri or None, mlflow_error=e.error or None)
        elif self.record.state == "reserving" and self.sweep.live:
            self.update(state="running")

    def _metrics(self) -> dict[str, float]:
        counts, best = tally(self.sweep.ended, self.sweep.direction)
        out = {state: float(n) for state, n in counts.items()}
        out["trials"] = float(self.sweep.trials)
        if best is not None:
            out[f"best {self.sweep.metric}"] = float(best.value)
        return out

    def _watch_stop_requests(self) -> None:
        tracker.watch_stop_requests(self.sweep.sweep_id, self.sweep.wait_ended, self.sweep.stop, self._stop_failed)

    def _stop_failed(self, error: Exception) -> None:
        log.warning("sweep %s: a stop request failed: %s", self.sweep.name, error)
        self.update(error=f"stop request failed: {error}")


def sweep(fn: Callable, space: Mapping[str, Any], *, trials: int, parallel: int | None = None, workers: int = 2,
          metric: str = "loss", direction: str = "minimize", spark: Any = None, monitor: str = "auto",
          tensorboard: bool = True, wait: bool = False, shell: Any = None, **options: Any) -> SweepRun:
    """Run a hyperparameter search whose trials are distributed runs of ``fn``, several at once.

    ``fn(args, ctx)`` runs on every node of each trial with the trial's parameters on ``args``; the
    chief reports ``metric`` (``ctx.report(step, loss=...)``, or ``ctx.callbacks()`` with Keras) and
    the pruner stops poor trials early. Arguments and options are ``Sweep``'s (``sampler``,
    ``pruner``, ``seed``, ``name``, ``storage``, ``args``, ``log_dir``, ``model_dir``, ``mlflow``,
    any ``Run`` option); ``spark``: the SparkSession (default: the active one, or a local one);
    ``monitor``: ``auto``, ``widget``, ``text`` or ``none``; ``tensorboard``: one TensorBoard for the
    sweep; ``wait``: block until it ends.

    Returns a :class:`SweepRun` (``wait()`` returns the best trial). Raises at once: ConfigError (a
    malformed space, an unknown option, Optuna missing), PreflightError (a trial cannot fit the
    cluster).
    """
    spark = spark or notebook_spark(workers * (parallel or 1), print)
    chosen = choose_monitor(monitor, shell)
    handle = SweepRun(Sweep(spark, fn, space, trials=trials, parallel=parallel, workers=workers, metric=metric,
                            direction=direction, **options), chosen, OutputTarget(shell), tensorboard)
    handle.start()
    if wait:
        try:
            handle.wait()
        except KeyboardInterrupt:
            handle.stop()
            raise
    return handle


@dataclass
class SweepOptions:
    """Options of ``%%tfos_sweep`` (see ``%%tfos_sweep?``); the trial's ``args`` holds them, its
    parameters set over them."""

    space: str = ""
    trials: int = 10
    parallel: int | None = None
    workers: int = 2
    metric: str = "loss"
    maximize: bool = False
    sampler: str = "tpe"
    pruner: str = "median"
    seed: int | None = None
    name: str | None = None
    epochs: int = 1
    gpus: int = 0
    logdir: str | None = None
    model_dir: str | None = None
    reservation_timeout: float = 600.0
    mlflow: bool | str | None = None
    keras3: bool = False
    monitor: str = "auto"
    tensorboard: bool = True
    wait: bool = False


def sweep_cell(body: str, o: SweepOptions, user_ns: MutableMapping[str, Any], *, runs: Any = None,
               spark: Any = None, execution_count: int | None = None, shell: Any = None) -> SweepRun:
    """What ``%%tfos_sweep`` does: ``body`` runs on every node of each trial, as in ``%%tfos_train``,
    with ``args`` holding the options and the trial's parameters (``--space VAR``, a dict in the
    notebook)."""
    if not o.space:
        raise ConfigError("--space VAR is needed: the name of a dict in the notebook, e.g. space = "
                          "{'lr': (1e-4, 1e-1, 'log'), 'units': [32, 64]}")
    if o.space not in user_ns:
        raise ConfigError(f"--space {o.space}: there is no variable {o.space!r} in the notebook")
    if o.name and o.name.isidentifier() and o.name in user_ns and not isinstance(user_ns[o.name], SweepRun):
        raise ConfigError(f"--name {o.name} would replace the notebook variable {o.name!r}: choose another name")
    cell = capture_cell(body, user_ns, execution_count)
    base = {"epochs": o.epochs, "workers": o.workers, "model_dir": o.model_dir, "logdir": o.logdir}
    handle = sweep(cell, user_ns[o.space], trials=o.trials, parallel=o.parallel, workers=o.workers, metric=o.metric,
                   direction="maximize" if o.maximize else "minimize", sampler=o.sampler, pruner=o.pruner,
                   seed=o.seed, name=o.name, args=base, log_dir=o.logdir, model_dir=o.model_dir, mlflow=o.mlflow,
                   spark=spark, monitor=o.monitor, tensorboard=o.tensorboard, wait=o.wait, shell=shell,
                   gpus_per_node=o.gpus, reservation_timeout=o.reservation_timeout,
                   legacy_keras=False if o.keras3 else None)
    if runs is not None:
        runs.add_sweep(handle)
    if o.name and o.name.isidentifier():
        user_ns[o.name] = handle
    return handle
