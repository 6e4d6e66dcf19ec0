"""Spark + TensorFlow mechanics: no IPython, widget or Jupyter imports here, and TensorFlow is
imported only inside the nodes' processes.

The names below are imported on first use, so that a node's child process, which imports
``runtime.child``, loads neither pyspark nor the driver's modules.
"""

from __future__ import annotations

from ..lazy import lazy_exports

_EXPORTS = {
    **{name: (".ctx", name) for name in ("NodeContext",)},
    "Finding": (".finding", "Finding"),
    **{name: (".diagnose", name) for name in ("Snapshot", "diagnose")},
    **{name: (".launch", name) for name in ("Run",)},
    **{name: (".roles", name) for name in ("plan_roles",)},
    **{name: (".lifecycle", name) for name in ("NodeState", "RunState")},
    **{name: (".errors", name) for name in (
        "ConfigError", "FeedError", "FeedTimeout", "LaunchError", "NodeError", "PreflightError",
        "ReservationTimeout", "ResultError", "RunStopped", "SparkJobError", "TFOSError")},
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
