"""An evaluation's metrics in its training run's MLflow run (``%%tfos_evaluate``), so one MLflow
run shows the training and the evaluation curves."""

from __future__ import annotations

import time
from collections.abc import Mapping

from .content import safe_key


def log_evaluation(tracking_uri: str, mlflow_run_id: str, name: str, step: int, metrics: Mapping[str, float]) -> None:
    """Log ``metrics`` of the checkpoint at ``step`` as ``<name>_<metric>`` (``eval_accuracy``...)
    into the MLflow run ``mlflow_run_id`` of ``tracking_uri``; an ended MLflow run takes them too.

    Raises:
        MlflowException (or the store's error): the tracking store refused them or cannot be reached.
    """
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    MlflowClient(tracking_uri).log_batch(
        mlflow_run_id, metrics=[Metric(safe_key(f"{name}_{key}"), float(value), now, step)
                                for key, value in metrics.items()])
