"""Whether a run is logged to MLflow, and into which experiment.

``Run(..., mlflow=...)`` and ``%%tfos_train --mlflow [EXPERIMENT] / --no-mlflow`` take a setting:
``True`` (log into the notebook's current experiment), an experiment name, ``False`` (do not log),
or ``None``: what the ``TFOS_MLFLOW`` environment variable says (``%tfos_config mlflow ...`` sets
it in a kernel): ``on``, ``off`` or ``auto`` (the default). ``auto`` logs where MLflow autologging
is the platform's default, which is a Databricks cluster (the Spark backend's Databricks context,
read as MLflow reads it; not serverless compute, where autologging is off by default) with MLflow
installed, unless the cluster turned autologging off with the Spark conf
``spark.databricks.mlflow.autologging.enabled false``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ConfigError

MLFLOW_ENV = "TFOS_MLFLOW"
ENV_VALUES = ("auto", "on", "off")
DATABRICKS_AUTOLOG_CONF = "spark.databricks.mlflow.autologging.enabled"
INSTALL_HINT = "pip install 'tfos_notebook[mlflow]' (or pip install mlflow) on the driver"


@dataclass(frozen=True)
class TrackingConfig:
    """A run logged to MLflow: ``experiment`` is the experiment's name, or None for the notebook's
    current one (``mlflow.set_experiment``, ``MLFLOW_EXPERIMENT_NAME``, a Databricks notebook's
    own experiment); inside an active MLflow run, the run's experiment. ``parent_run_id`` (with
    its ``parent_experiment_id``) makes the run a child of that MLflow run whatever run is active
    (a sweep's trials are children of the sweep's run)."""

    experiment: str | None = None
    parent_run_id: str | None = None
    parent_experiment_id: str | None = None


def mlflow_installed() -> bool:
    return importlib.util.find_spec("mlflow") is not None


def require_mlflow(what: str) -> None:
    """ConfigError naming the install when ``what`` needs MLflow and it is not installed."""
    if not mlflow_installed():
        raise ConfigError(f"{what} logs the run to MLflow, which is not installed here: {INSTALL_HINT}, "
                          "or turn it off (--no-mlflow, Run(..., mlflow=False), TFOS_MLFLOW=off)")


def resolve(setting: bool | str | None, on_databricks: bool = False,
            conf: Callable[[str], str | None] | None = None) -> TrackingConfig | None:
    """The tracking a run gets from its ``mlflow`` setting (see the module's docstring); None: none.

    Args:
        setting: ``True``, an experiment name, ``False``, ``None`` (the environment decides), or
            a ``TrackingConfig`` (taken as it is).
        on_databricks: whether the driver runs on Databricks compute that autologs by default (a
            cluster, not serverless: ``DatabricksContext.autologs_by_default``).
        conf: reads a Spark conf key (None when unset), for the Databricks autologging switch.

    Raises:
        ConfigError: MLflow asked for but not installed, an empty experiment name, or a
            ``TFOS_MLFLOW`` value other than ``auto``, ``on`` and ``off``.
    """
    if setting is False:
        return None
    if isinstance(setting, TrackingConfig):
        return setting
    if isinstance(setting, str):
        if not setting.strip():
            raise ConfigError("mlflow: the experiment name is empty; give a name, or True for the current experiment")
        require_mlflow(f"mlflow={setting!r}")
        return TrackingConfig(setting)
    if setting is True:
        require_mlflow("mlflow=True")
        return TrackingConfig()
    if setting is not None:
        raise ConfigError(f"mlflow must be True, False, None or an experiment name, got {type(setting).__name__}")
    value = os.environ.get(MLFLOW_ENV, "auto").strip().lower() or "auto"
    if value not in ENV_VALUES:
        raise ConfigError(f"{MLFLOW_ENV} must be one of {', '.join(ENV_VALUES)}, got {value!r}")
    if value == "on":
        require_mlflow(f"{MLFLOW_ENV}=on")
        return TrackingConfig()
    if value == "auto" and on_databricks and autolog_is_default(conf):
        return TrackingConfig()
    return None


def autolog_is_default(conf: Callable[[str], str | None] | None = None) -> bool:
    """Whether MLflow autologging is on by default on this Databricks driver: MLflow is installed
    (the ML runtimes) and the cluster did not turn autologging off (a conf that cannot be read
    leaves it on)."""
    if not mlflow_installed():
        return False
    try:
        switch = conf(DATABRICKS_AUTOLOG_CONF) if conf is not None else None
    except Exception:  # [CONFIG_NOT_AVAILABLE] on some compute: the default stands
        switch = None
    return (switch or "true").strip().lower() != "false"
