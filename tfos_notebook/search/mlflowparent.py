"""The MLflow run of a sweep: the parent of its trials' runs.

Made by ``Sweep.start`` when the sweep is logged to MLflow. Its thread creates the parent run (or,
when the sweep resumes, takes its earlier parent run up again: the study keeps its id), logs the
sweep's plan as params, and as trials end the best value so far (``best_<metric>``, at the count
of ended trials) and the counts of finished, pruned and failed trials; then sets its status. Each
trial's run is logged by its own ``tracking.MlflowTracker``, as a child (``child_config``).
Nothing that goes wrong here stops the sweep: it is logged and published (``MlflowRun.error``).
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from ..runtime.driver.events import Event, MlflowRun
from ..tracking import content as c
from ..tracking.fold import millis
from ..tracking.links import run_url
from ..tracking.mlflowrun import PARENT_RUN_TAG, caller_context, experiment_for, problem_text
from ..tracking.settings import TrackingConfig
from .events import SweepFinished, SweepStarted, TrialEnded, tally

log = logging.getLogger(__name__)

RUN_ID_ATTR = "tfos_mlflow_run_id"  # the study's user attribute holding the parent run's id
TAG_SWEEP = "tfos.sweep"
TAG_BEST = "tfos.sweep.best_trial"
CREATE_SECS = 60.0


class SweepParent:
    """The parent MLflow run of ``sweep``, kept from its events by a thread of its own."""

    def __init__(self, sweep: Any, config: TrackingConfig) -> None:  # a runner.Sweep, which imports this
        self.sweep, self.config = sweep, config
        # the caller's active MLflow run (the sweep's parent) and tracking store
        self._outer, self.tracking_uri = caller_context()
        self.mlflow_run_id: str | None = None
        self.experiment_id: str | None = None
        self.url: str | None = None
        self.error: str | None = None
        self._client: Any = None
        self._queue: queue.Queue = queue.Queue()
        self._created = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"tfos-mlflow-{sweep.sweep_id}")

    def start(self) -> SweepParent:
        """Create the parent run (waiting for it: the trials' runs are its children)."""
        self._resumed = self.sweep.study.user_attrs.get(RUN_ID_ATTR)
        self._thread.start()
        self._created.wait(CREATE_SECS)
        if self.mlflow_run_id is not None and self.mlflow_run_id != self._resumed:
            self.sweep.study.set_user_attr(RUN_ID_ATTR, self.mlflow_run_id)
        self._unsubscribe = self.sweep.events.subscribe(self._queue.put)
        return self

    def child_config(self) -> TrackingConfig:
        """How a trial's run is logged: a child of this run (of none, logged as any run, when the
        parent could not be created)."""
        if self.mlflow_run_id is None:
            return self.config
        return TrackingConfig(self.config.experiment, self.mlflow_run_id, self.experiment_id)

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    # -- the thread ------------------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            self._create()
        except Exception as e:  # no store, a refused experiment: the trials are logged without a parent
            self._problem("the sweep's MLflow run could not be created", e)
            self._created.set()
            self._done.set()
            return
        self._created.set()
        try:
            while True:
                event = self._queue.get()
                self._log(event)
                if isinstance(event, SweepFinished):
                    return
        except Exception as e:  # a bug here must not touch the sweep
            log.exception("sweep %s: MLflow logging stopped", self.sweep.name)
            self._problem("MLflow logging stopped", e)
        finally:
            self._unsubscribe()
            self._done.set()

    def _create(self) -> None:
        import mlflow
        from mlflow import MlflowClient

        self.tracking_uri = self.tracking_uri or mlflow.get_tracking_uri()
        self._client = MlflowClient(self.tracking_uri)
        if self._resumed:
            info = self._client.get_run(self._resumed).info
            self._client.update_run(self._resumed, status="RUNNING")
            self.mlflow_run_id, self.experiment_id = info.run_id, info.experiment_id
        else:
            tags = {TAG_SWEEP: self.sweep.name}
            if self._outer is not None:
                tags[PARENT_RUN_TAG] = self._outer[0]
            experiment = experiment_for(self._client, self.config, self._outer[1] if self._outer else None)
            # the fluent API gives the context tags (user, source, notebook) the caller's own runs get
            active = mlflow.start_run(experiment_id=experiment, run_name=self.sweep.name, tags=tags,
                                      log_system_metrics=False)
            self.mlflow_run_id, self.experiment_id = active.info.run_id, active.info.experiment_id
        databricks = self.sweep.backend.databricks()
        self.url = run_url(self.tracking_uri, self.experiment_id, self.mlflow_run_id,
                           databricks.browser_host if databricks is not None else None)
        self._publish()

    def _log(self, event: Event) -> None:
        from mlflow.entities import Metric, Param, RunTag

        if isinstance(event, SweepStarted) and not self._resumed:
            params = {"trials": event.trials, "parallel": event.parallel or "slots", "workers": event.workers,
                      "metric": event.metric, "direction": event.direction, "sampler": event.sampler,
                      "pruner": event.pruner, **{f"space.{k}": v for k, v in event.space.items()}}
            self._client.log_batch(self.mlflow_run_id, params=[
                Param(c.safe_key(k), str(v)[:c.MAX_PARAM_VALUE]) for k, v in params.items()])
        elif isinstance(event, TrialEnded) and not event.earlier:  # a resumed sweep's were logged before
            ended = [e for e in self.sweep.ended if e.t <= event.t or e.earlier]  # as of this trial's end
            counts, best = tally(ended, self.sweep.direction)
            now, step = millis(event.t), len(ended)
            metrics = [Metric(f"trials_{state}", n, now, step) for state, n in counts.items()]
            tags = []
            if best is not None:
                metrics.append(Metric(c.safe_key(f"best_{self.sweep.metric}"), best.value, now, step))
                tags.append(RunTag(TAG_BEST, str(best.number)))
            self._client.log_batch(self.mlflow_run_id, metrics=metrics, tags=tags)
        elif isinstance(event, SweepFinished):
            if event.error:
                self._client.set_tag(self.mlflow_run_id, c.TAG_ERROR, c.error_tag(event.error))
            self._client.set_terminated(self.mlflow_run_id, c.STATUS_OF_STATE.get(event.state, "FAILED"))

    def _publish(self) -> None:
        self.sweep.events.publish(MlflowRun(self.sweep.sweep_id, mlflow_run_id=self.mlflow_run_id or "",
                                            experiment_id=self.experiment_id or "",
                                            tracking_uri=self.tracking_uri or "", url=self.url or "",
                                            error=self.error or ""))

    def _problem(self, what: str, error: BaseException) -> None:
        text = problem_text(what, error)
        log.warning("sweep %s: MLflow: %s", self.sweep.name, text)
        if self.error is None:
            self.error = text
            self._publish()

