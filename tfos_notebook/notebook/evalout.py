"""Where an evaluation's metrics go: TensorBoard scalars at the checkpoint's step, into the run's
mirror (beside the nodes' curves) or, for a run without a TensorBoard, under the state directory;
and the run's MLflow run, when it has one."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from ..state.files import state_dir

log = logging.getLogger(__name__)

Metrics = dict[str, float]


class EvaluationOutput:
    """The outputs of the evaluation ``name`` of a run; ``say(text)`` tells the user where the
    curves go. ``logdir`` is where the scalars go (None until the first is written)."""

    def __init__(self, name: str, say: Callable[[str], None]) -> None:
        self.name, self.say = name, say
        self.logdir: str | None = None
        self._writer = None
        self._mlflow_failed = False

    def write(self, record: Any, step: int, metrics: Metrics) -> None:
        """The metrics of the checkpoint of ``step``, of the run whose registry record (as it is
        now: its MLflow run comes within seconds of the launch) is ``record``."""
        self._write(record, step, metrics)
        self._log_to_mlflow(record, step, metrics)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()

    def _write(self, record: Any, step: int, metrics: Metrics) -> None:
        import tensorflow as tf

        if self._writer is None:
            self.logdir = self._choose_logdir(record)
            self._writer = tf.summary.create_file_writer(self.logdir)
        with self._writer.as_default():
            for tag, value in metrics.items():
                tf.summary.scalar(tag, value, step=step)
        self._writer.flush()  # TensorBoard shows the point within about a second

    def _log_to_mlflow(self, record: Any, step: int, metrics: Metrics) -> None:
        """Into the run's MLflow run, when it has one (created within seconds of the launch), as
        ``<name>_<metric>`` at ``step``; a failure is said once and the evaluation goes on."""
        if not record.mlflow_run_id or not record.mlflow_tracking_uri:
            return
        from ..tracking.evaluation import log_evaluation

        try:
            log_evaluation(record.mlflow_tracking_uri, record.mlflow_run_id, self.name, step, metrics)
        except Exception as e:  # the TensorBoard curves are written; MLflow may come back
            log.warning("evaluation of run %s: metrics of step %d not logged to MLflow", record.name, step,
                        exc_info=True)
            if not self._mlflow_failed:
                self._mlflow_failed = True
                self.say(f"MLflow: the metrics were not logged to run {record.mlflow_run_id}: {one_line(e)}")

    def _choose_logdir(self, record: Any) -> str:
        if record.mirror_dir:
            where = f" (TensorBoard at {record.tensorboard_url})" if record.tensorboard_url else ""
            self.say(f"curves go to the run's TensorBoard as run {self.name!r}{where}")
            return os.path.join(record.mirror_dir, self.name)
        logdir = os.path.join(state_dir(), "evals", record.run_id, self.name)
        self.say(f"run {record.name} has no TensorBoard: curves go to {logdir} "
                  f"(%tfos_tensorboard {os.path.dirname(logdir)} shows them)")
        return logdir


def as_metrics(value: Any) -> Metrics:
    """``value`` as ``{tag: float}``; TypeError naming what is wrong otherwise."""
    if not isinstance(value, Mapping) or not value:
        raise TypeError(f"the evaluation returned {type(value).__name__}, not a dict of metrics such as "
                        "{'accuracy': 0.93}")
    metrics = {}
    for key, v in value.items():
        try:
            metrics[str(key)] = float(v)
        except (TypeError, ValueError):
            raise TypeError(f"the evaluation returned {key!r}: {type(v).__name__}, not a number") from None
    return metrics


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
