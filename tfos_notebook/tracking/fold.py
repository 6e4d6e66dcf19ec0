"""A run's events folded into what its MLflow run gets: metric points, params and tags waiting to
be sent, and what the end needs (the chief's last step, the exported model). No MLflow here: the
tracker (``mlflowrun.py``) sends what gathers."""

from __future__ import annotations

import logging
from typing import Any

from ..runtime.driver.events import (
    AttemptEnded,
    Event,
    GpuStats,
    LaunchSubmitted,
    MlflowCalled,
    ModelExported,
    Registered,
    RunFinished,
    Step,
    SystemStats,
    TensorBoardStarted,
)
from . import content as c
from .batch import Pending

log = logging.getLogger(__name__)

#: The events that matter to an MLflow run (steps and relayed calls only from the chief).
TRACKED = (Step, MlflowCalled, GpuStats, SystemStats, LaunchSubmitted, AttemptEnded, TensorBoardStarted,
           ModelExported, Registered, RunFinished)


def millis(t: float) -> int:
    return int(t * 1000)


class RunFold:
    """What the events of a run whose params are ``params`` add to its MLflow run so far.

    ``pending`` is what waits to be sent; ``params`` every param the run logs (set once each);
    ``export`` the model the chief exported; ``last_step`` the chief's last reported step.
    """

    def __init__(self, params: dict[str, str]) -> None:
        self.pending = Pending()
        self.pending.params.update(params)
        self.params = dict(params)
        self.owners = c.MetricOwners()
        self.samples: dict[str, int] = {}  # system samples per node so far: the step of the next one
        self.last_step = 0
        self.export: ModelExported | None = None
        self.keras: set[str] = set()  # which Keras the nodes' tf.keras is

    def apply(self, event: Event) -> None:
        """Fold one event (of ``TRACKED``) in."""
        if isinstance(event, Step):
            kept = self.owners.keep("report", c.finite_metrics(event.metrics))
            self.pending.add_metrics(kept, event.step, millis(event.t))
            self.last_step = max(self.last_step, event.step)
        elif isinstance(event, MlflowCalled):
            self._relayed(event)
        elif isinstance(event, GpuStats):
            node = c.node_id(event.role, event.index)
            self._sample(node, c.gpu_metrics(node, event.gpus), event.t)
        elif isinstance(event, SystemStats):
            node = c.node_id(event.role, event.index)
            self._sample(node, c.cpu_metrics(node, event.cpu_percent, event.memory_used_mb, event.memory_percent),
                         event.t)
        elif isinstance(event, LaunchSubmitted) and event.attempt:
            self.pending.tags[c.TAG_ATTEMPTS] = str(event.attempt + 1)
        elif isinstance(event, AttemptEnded):
            resumed = f"; resumed from step {event.step}" if event.step is not None else ""
            self.pending.tags[f"{c.TAG_ATTEMPT}.{event.attempt + 1}"] = \
                f"{event.cause}, {event.workers} training nodes: {event.detail}{resumed}"[:c.MAX_TAG_VALUE]
        elif isinstance(event, TensorBoardStarted):
            self.pending.tags[c.TAG_TENSORBOARD] = event.url
        elif isinstance(event, ModelExported):
            self.export = event
        elif isinstance(event, Registered) and event.keras and event.keras not in self.keras:
            self.keras.add(event.keras)
            self.pending.tags[c.TAG_KERAS] = ", ".join(sorted(self.keras))

    def finish(self, ended: RunFinished, result: Any, dropped: int = 0) -> None:
        """The run ended: the chief's returned numbers (when it finished), its error, and how many
        metric points were left out (``dropped``), as metrics and tags."""
        if ended.state == "finished":
            self.pending.add_metrics(c.result_metrics(result, self.owners.owned()), self.last_step, millis(ended.t))
        if ended.error:
            self.pending.tags[c.TAG_ERROR] = c.error_tag(ended.error)
        if dropped:
            self.pending.tags["tfos.metric_points_dropped"] = str(dropped)

    def _relayed(self, calls: MlflowCalled) -> None:
        """The chief's own MLflow calls: its metrics where no other source logs the name, its params
        unless the run holds that param already with another value (a param is set once), its tags."""
        for key, value, timestamp, step in calls.metrics:
            self.pending.add_metrics(self.owners.keep("mlflow", {c.safe_key(key): value}), step, timestamp)
        for key, value in calls.params:
            key, value = c.safe_key(key), value[:c.MAX_PARAM_VALUE]
            if self.params.setdefault(key, value) == value:
                self.pending.params[key] = value
            else:
                log.info("the chief's MLflow param %s=%s is left out: the run logged %s=%s", key, value, key,
                         self.params[key])
        for key, value in calls.tags:
            self.pending.tags[c.safe_key(key)] = value[:c.MAX_TAG_VALUE]

    def _sample(self, node: str, metrics: dict[str, float], t: float) -> None:
        """One system sample of ``node``: its steps count its samples, as MLflow's own monitor does."""
        step = self.samples.get(node, 0)
        self.samples[node] = step + 1
        self.pending.add_metrics(metrics, step, millis(t))
