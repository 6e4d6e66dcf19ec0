"""The run users build (``tfos_notebook.Run``): the runtime's run, logged to MLflow when asked.

The runtime knows nothing of MLflow but a flag that tells the nodes to relay their MLflow calls to
the driver (``Run.relay_mlflow``). :class:`TrackedRun` resolves the ``mlflow`` option when it is
made, starts its :class:`~.mlflowrun.MlflowTracker` where the runtime lets a run be extended
(``Run._before_submit``: under the run's lock, once pre-flight passed, right before the job is
submitted, so that a run refused by pre-flight leaves no MLflow run behind), and counts the MLflow
run's completion in ``wait``. ``peers/``, ``notebook/`` and ``search/`` build their runs with it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..runtime.driver.run.launch import Run
from .mlflowrun import MlflowTracker
from .settings import TrackingConfig, resolve

log = logging.getLogger(__name__)

TRACKING_WAIT_SECS = 120  # what ``wait`` gives a tracked run's MLflow run to complete after the run ended


class TrackedRun(Run):
    """A :class:`~..runtime.driver.run.launch.Run` logged as one MLflow run from the driver when
    its ``mlflow`` option says so.

    Args:
        sc, main_fun, args, num_nodes, and the keyword options: the runtime ``Run``'s.
        mlflow: log the run as one MLflow run from the driver (``tfos_notebook.tracking``): True
            (the current experiment, or, inside an active MLflow run, as its child), an
            experiment's name, False (not logged), a :class:`~.settings.TrackingConfig` (a sweep's
            trial: the child of the sweep's run), or None: as the ``TFOS_MLFLOW`` environment
            variable says (``on``, ``off``, or ``auto``, the default: logged on Databricks, where
            MLflow autologging is the platform's default).

    ``tracking_config`` is the resolved setting (None: not logged); ``tracking`` the run's
    :class:`~.mlflowrun.MlflowTracker` once the run started (None before, and for a run not logged).
    """

    def __init__(self, sc, main_fun, args: Any, num_nodes: int, *, num_ps: int = 0,
                 master_node: str | None = "chief", eval_node: bool = False, log_dir: str | None = None,
                 model_dir: str | None = None, reservation_timeout: float = 600.0,
                 gpus_per_node: int | Sequence[int] = 0,
                 env: dict[str, str] | None = None, legacy_keras: bool | None = None, name: str | None = None,
                 preflight_wait: float = 30.0, stop_grace_secs: float = 5.0, retries: int = 2,
                 input_mode: str = "tensorflow", feed_buffer_mb: float = 64, independent: bool = False,
                 release_port: bool = True, mlflow: bool | str | TrackingConfig | None = None,
                 memory_limit_mb: float = 0, min_workers: int | None = None, replacement_grace: float = 60.0) -> None:
        super().__init__(sc, main_fun, args, num_nodes, num_ps=num_ps, master_node=master_node, eval_node=eval_node,
                         log_dir=log_dir, model_dir=model_dir, reservation_timeout=reservation_timeout,
                         gpus_per_node=gpus_per_node, env=env, legacy_keras=legacy_keras, name=name,
                         preflight_wait=preflight_wait, stop_grace_secs=stop_grace_secs, retries=retries,
                         input_mode=input_mode, feed_buffer_mb=feed_buffer_mb, independent=independent,
                         release_port=release_port, memory_limit_mb=memory_limit_mb, min_workers=min_workers,
                         replacement_grace=replacement_grace)
        where = self.backend.databricks()
        self.tracking_config = resolve(mlflow, where is not None and where.autologs_by_default, self.backend.conf)
        self.tracking: MlflowTracker | None = None

    def _before_submit(self) -> None:
        """Start logging the run to MLflow (when it is tracked), and have its nodes relay their
        MLflow calls to it."""
        if self.tracking_config is not None:
            self.tracking = MlflowTracker(self, self.tracking_config).start()
            self.relay_mlflow = True

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the run ends; returns the chief's value, or raises the run's error (see
        :meth:`Run.wait <..runtime.driver.run.launch.Run.wait>`).

        A run logged to MLflow has ended once its MLflow run is complete too (its status set, its
        model logged), so that a script may exit after ``wait``; that part is waited for
        ``TRACKING_WAIT_SECS`` at most (the logging goes on in the background after)."""
        self.outcome.ended(timeout)
        if self.tracking is not None and not self.tracking.wait(TRACKING_WAIT_SECS):
            log.warning("run %s: its MLflow run is still being completed after %ds", self.name, TRACKING_WAIT_SECS)
        return self.outcome.value()
