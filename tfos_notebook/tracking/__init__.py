"""Experiment tracking: each training run logged as one MLflow run, from the driver.

A consumer of the run's event stream, like the monitor and the runs registry: the driver creates,
logs to and ends the MLflow run, so the nodes need neither credentials nor a route to the tracking
server. ``Run(..., mlflow=...)`` and ``%%tfos_train --mlflow`` turn it on (``settings.py``);
``run.py`` defines that ``Run`` (``TrackedRun``: the runtime's run, which imports nothing of this
package, with the logger attached); ``mlflowrun.py`` keeps the MLflow run; ``content.py`` decides
what goes in it.

The names below are imported on first use (see ``lazy.py``); MLflow itself only once a run is
tracked.
"""

from __future__ import annotations

from ..lazy import lazy_exports

_EXPORTS = {
    "MlflowTracker": (".mlflowrun", "MlflowTracker"),
    "TrackedRun": (".run", "TrackedRun"),
    **{name: (".settings", name) for name in ("TrackingConfig", "resolve", "MLFLOW_ENV")},
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
