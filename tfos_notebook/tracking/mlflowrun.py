"""One MLflow run per training run, created, logged to and ended by the driver.

An :class:`MlflowTracker` consumes the run's event stream like every view: its subscriber only
queues what matters (the publisher never waits for MLflow), and a thread of its own creates the
MLflow run, sends what gathered every ``FLUSH_SECS`` as batches, and once the run has ended logs
the final metrics and the exported model and sets the status. The nodes never reach MLflow: their
own MLflow calls come to the driver over the control channel (``runtime/node/child/mlflowrelay.py``).
Nothing that goes wrong here fails the run: it is logged, and published as an ``MlflowRun`` event
with its ``error``. A driver process (a kernel) that exits while a run goes on ends its MLflow run
as KILLED on its way out (``close_at_exit``), rather than leaving it RUNNING for ever; a process
killed outright (SIGKILL, a crash) cannot, and its MLflow run stays RUNNING.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Protocol

from ..runtime.driver.events import (
    Event,
    EventStream,
    MlflowCalled,
    MlflowRun,
    ModelExported,
    RunFinished,
    Step,
)
from ..runtime.host.procs import lower_thread_priority
from ..runtime.wire.plan import chief_of
from . import content as c
from .batch import MAX_ENTITIES
from .fold import TRACKED, RunFold, millis
from .links import run_url
from .settings import TrackingConfig

log = logging.getLogger(__name__)

FLUSH_SECS = 2.0  # what gathered is sent at least this often (and when a request's worth is waiting)
QUEUE_LIMIT = 100_000  # events waiting for the thread; past it, metric points are dropped and counted
_QUIET = threading.Lock()

#: The tag by which MLflow knows a run's parent run.
PARENT_RUN_TAG = "mlflow.parentRunId"
EXIT_SECS = 10.0  # how long an exiting driver waits for MLflow to take a run's KILLED status
DRIVER_EXITED = "the driver process exited while the run was running"
_LIVE: set[MlflowTracker] = set()  # trackers whose MLflow run is not complete


class ObservedRun(Protocol):
    """What the tracker reads of a run (``runtime.driver.run.launch.Run``)."""

    run_id: str
    name: str
    roles: list[tuple[str, int]]
    input_mode: str
    args: Any
    events: EventStream

    @property
    def backend(self) -> Any: ...  # its SparkBackend: ``conf(key)``, ``databricks()``

    @property
    def result(self) -> Any: ...  # the chief's return value, once the run ended


class MlflowTracker:
    """The MLflow run of ``run``, kept by a thread of its own from the run's events.

    Made (and started) by a tracked run as it starts (``run.TrackedRun``): ``run.tracking``. Inside
    an active MLflow run of the caller's thread, the MLflow run is its child (``mlflow.parentRunId``,
    in the parent's experiment unless ``config`` names one).

    Attributes:
        mlflow_run_id, experiment_id, url: the MLflow run once created (None before; ``url`` also
            None for a store that no UI serves, such as ``sqlite:``).
        tracking_uri: the tracking store, as the caller's MLflow resolved it at the start (or, when
            the caller had not imported MLflow, as this thread resolves it: from the environment).
        parent_run_id: the caller's active MLflow run, if any.
        error: what went wrong with the logging, if anything.
        dropped: metric points left out because MLflow could not keep up (see ``QUEUE_LIMIT``).
    """

    def __init__(self, run: ObservedRun, config: TrackingConfig) -> None:
        self.run, self.config = run, config
        self.parent_run_id: str | None = None
        self._parent_experiment: str | None = None
        outer, self.tracking_uri = caller_context()
        if outer is not None:
            self.parent_run_id, self._parent_experiment = outer
        if config.parent_run_id is not None:
            self.parent_run_id, self._parent_experiment = config.parent_run_id, config.parent_experiment_id
        self.mlflow_run_id: str | None = None
        self.experiment_id: str | None = None
        self.url: str | None = None
        self.error: str | None = None
        self.dropped = 0
        self._client: Any = None
        self._queue: queue.Queue = queue.Queue(QUEUE_LIMIT)
        self._fold = RunFold({})
        self._chief = chief_of(run.roles)
        self._done = threading.Event()
        self._unsubscribe = lambda: None
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"tfos-mlflow-{run.run_id}")

    def start(self) -> MlflowTracker:
        self._unsubscribe = self.run.events.subscribe(self._enqueue)
        _LIVE.add(self)
        self._thread.start()
        return self

    def kill(self) -> None:
        """End the MLflow run as KILLED, tagged with why, unless it is complete (the driver exits)."""
        if self.done or self.mlflow_run_id is None:
            return
        try:
            with _no_url_printed():
                self._client.set_tag(self.mlflow_run_id, c.TAG_ERROR, DRIVER_EXITED)
                self._client.set_terminated(self.mlflow_run_id, "KILLED")
        except Exception as e:
            log.warning("run %s: MLflow: the run's KILLED status was not set: %s", self.run.name, e)

    @property
    def done(self) -> bool:
        """Whether the MLflow run is complete (or its logging gave up)."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the MLflow run is complete (status set, model logged); False on timeout."""
        return self._done.wait(timeout)

    # -- the publisher's side ------------------------------------------------------------------
    def _enqueue(self, event: Event) -> None:
        if isinstance(event, (Step, MlflowCalled)) and (event.role, event.index) != self._chief:
            return  # the run's metrics are the chief's; every node's are in the monitor
        if isinstance(event, TRACKED):
            self._put(event)

    def _put(self, item: Any) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:  # MLflow cannot keep up: training must not wait for it
            if self.dropped == 0:
                log.warning("run %s: MLflow logging falls behind; metric points are left out", self.run.name)
            self.dropped += 1

    # -- the thread ----------------------------------------------------------------------------
    def _loop(self) -> None:
        lower_thread_priority()  # on a driver that shares its cores with nodes (local mode), nodes come first
        try:
            self._create()
        except Exception as e:  # no tracking store, a refused experiment...: the run goes on untracked
            self._problem("the MLflow run could not be created", e)
            self._complete()
            return
        try:
            self._end(self._follow())
        except Exception as e:  # a bug here must neither hang run.wait() nor touch the run
            log.exception("run %s: MLflow logging stopped", self.run.name)
            self._problem("MLflow logging stopped", e)
        finally:
            self._complete()

    def _follow(self) -> RunFinished:
        """Fold the queued events in and send what gathers, until the run ends."""
        next_send = time.monotonic() + FLUSH_SECS
        while True:
            try:
                item = self._queue.get(timeout=max(0.0, next_send - time.monotonic()))
            except queue.Empty:
                item = None
            if isinstance(item, RunFinished):
                return item
            if item is not None:
                self._fold.apply(item)
            if time.monotonic() >= next_send or len(self._fold.pending) >= MAX_ENTITIES:
                self._send()
                next_send = time.monotonic() + FLUSH_SECS

    def _complete(self) -> None:
        _LIVE.discard(self)
        self._unsubscribe()
        self._publish(complete=True)
        self._done.set()

    def _publish(self, complete: bool = False) -> None:
        self.run.events.publish(MlflowRun(self.run.run_id, mlflow_run_id=self.mlflow_run_id or "",
                                          experiment_id=self.experiment_id or "", tracking_uri=self.tracking_uri or "",
                                          url=self.url or "", error=self.error or "", complete=complete))

    def _create(self) -> None:
        import mlflow
        from mlflow import MlflowClient

        self.tracking_uri = self.tracking_uri or mlflow.get_tracking_uri()
        self._client = MlflowClient(self.tracking_uri)
        tags = c.run_tags(self.run.run_id, self.run.roles, self.run.input_mode,
                          self.run.backend.conf("spark.app.id"))
        if self.parent_run_id:  # the tag MLflow's own nested runs carry (start_run's parent_run_id is 2.13's)
            tags[PARENT_RUN_TAG] = self.parent_run_id
        # The fluent API resolves the experiment and the context tags (user, source, a Databricks
        # notebook's id) as the caller's own runs get them; the run is active on this thread only.
        active = mlflow.start_run(experiment_id=self._experiment_id(), run_name=self.run.name,
                                  tags=tags, log_system_metrics=False)
        self.mlflow_run_id, self.experiment_id = active.info.run_id, active.info.experiment_id
        databricks = self.run.backend.databricks()
        self.url = run_url(self.tracking_uri, self.experiment_id, self.mlflow_run_id,
                           databricks.browser_host if databricks is not None else None)
        self._fold = RunFold(c.run_params(self.run.roles, self.run.input_mode, self.run.args))
        self._publish()

    def _experiment_id(self) -> str | None:
        return experiment_for(self._client, self.config, self._parent_experiment)

    def _send(self) -> None:
        from mlflow.entities import Metric, Param, RunTag

        for request in self._fold.pending.requests():
            try:
                self._client.log_batch(
                    self.mlflow_run_id,
                    metrics=[Metric(p.key, p.value, p.timestamp, p.step) for p in request.metrics],
                    params=[Param(k, v) for k, v in request.params.items()],
                    tags=[RunTag(k, v) for k, v in request.tags.items()])
            except Exception as e:  # that batch is lost; the next may go through
                self._problem(f"{len(request.metrics)} metric points, {len(request.params)} params and "
                              f"{len(request.tags)} tags were not logged", e)

    def _end(self, ended: RunFinished) -> None:
        """The run ended: the rest of its points, its final metrics and error, then its status."""
        self._fold.finish(ended, self.run.result, self.dropped)
        self._send()
        if ended.state == "finished" and self._fold.export is not None:
            self._log_model(self._fold.export)
        try:
            with _no_url_printed():
                self._client.set_terminated(self.mlflow_run_id, c.STATUS_OF_STATE.get(ended.state, "FAILED"),
                                            end_time=millis(ended.t))
        except Exception as e:
            self._problem("the MLflow run's status was not set", e)

    def _log_model(self, export: ModelExported) -> None:
        """The exported model as the run's MLflow model; a failure is a tag and the run's ``error``."""
        from .model import log_exported_model

        try:
            if "://" not in export.path and not os.path.exists(export.path):
                raise FileNotFoundError(f"{export.path} is not on the driver: {export.name} exported "
                                        "it to its own host's disk; export to storage the driver shares")
            log_exported_model(self._client, self.mlflow_run_id, self.experiment_id, export.path,
                               export.keras == "keras2", self._fold.last_step, self._fold.params)
        except Exception as e:
            self._problem("the exported model was not logged", e)
            try:
                self._client.set_tag(self.mlflow_run_id, c.TAG_MODEL_ERROR, c.error_tag(str(e)))
            except Exception:  # the store is gone: the warning above says what matters
                log.debug("the model error tag was not set", exc_info=True)

    def _problem(self, what: str, error: BaseException) -> None:
        text = problem_text(what, error)
        log.warning("run %s: MLflow: %s", self.run.name, text)
        if self.error is None:  # the first problem is shown; later ones are in the log
            self.error = text
            self._publish()


def caller_context() -> tuple[tuple[str, str] | None, str | None]:
    """The caller's active MLflow run, as (run id, experiment id), and its tracking URI, where this
    process has imported MLflow (else nothing set a run or a URI here yet: importing takes seconds)."""
    if "mlflow" not in sys.modules:
        return None, None
    import mlflow

    active = mlflow.active_run()
    return (None if active is None else (active.info.run_id, active.info.experiment_id)), mlflow.get_tracking_uri()


def experiment_for(client: Any, config: TrackingConfig, parent_experiment: str | None) -> str | None:
    """The experiment named in ``config`` (created if new), else the parent run's, else None
    (MLflow's current experiment)."""
    if config.experiment is None:
        return parent_experiment
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(config.experiment)
    if found is not None:
        return found.experiment_id
    try:
        return client.create_experiment(config.experiment)
    except MlflowException:  # created meanwhile by another run
        return client.get_experiment_by_name(config.experiment).experiment_id


def problem_text(what: str, error: BaseException) -> str:
    """What went wrong with MLflow, in one line."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{what}: {type(error).__name__}: {first}"


def close_at_exit() -> None:
    """End the MLflow run of every run still going on in this exiting process as KILLED, waiting at
    most ``EXIT_SECS`` for MLflow (registered with ``atexit``)."""
    trackers = list(_LIVE)
    if not trackers:
        return
    closing = [threading.Thread(target=t.kill, daemon=True, name="tfos-mlflow-exit") for t in trackers]
    for thread in closing:
        thread.start()
    deadline = time.monotonic() + EXIT_SECS
    for thread in closing:
        thread.join(max(0.0, deadline - time.monotonic()))


atexit.register(close_at_exit)


@contextmanager
def _no_url_printed():
    """MLflow prints a run's URL to stdout when a REST-store run ends; the monitor shows the link
    already, and a background thread's print would land in whichever notebook cell ran last."""
    name = "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"
    with _QUIET:
        before = os.environ.get(name)
        os.environ[name] = "true"
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = before
