"""Spark + TensorFlow mechanics: no IPython, widget or Jupyter imports here, and TensorFlow is
imported only inside the nodes' processes.

The names below are imported on first use, so that a node's child process, which imports
``runtime.child``, loads neither pyspark nor the driver's modules.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "NodeContext": ".ctx",
    "Finding": ".diagnose", "Snapshot": ".diagnose", "diagnose": ".diagnose",
    "Run": ".launch", "plan_roles": ".launch",
    **{name: ".errors" for name in (
        "ConfigError", "FeedError", "FeedTimeout", "LaunchError", "NodeError", "PreflightError",
        "ReservationTimeout", "RunStopped", "SparkJobError", "TFOSError")},
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
