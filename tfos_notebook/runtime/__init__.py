"""Spark + TensorFlow mechanics: no IPython, widget or Jupyter imports here, and TensorFlow is
imported only inside the nodes' processes.

The names below are imported on first use, so that a node's child process, which imports
``runtime.node.child``, loads neither pyspark nor the driver's modules.

The runtime is split by where its code runs: ``driver/`` in the driver's process (the notebook
kernel or script), ``node/`` on the executors (``task/`` in Spark's Python worker, ``child/`` in the
node's own process), ``wire/`` the protocols both ends speak, and ``host/`` what one host has and
does, for every process. ``node/`` and ``driver/`` import nothing of each other; both import
``wire/`` and ``host/``.
"""

from __future__ import annotations

from ..lazy import lazy_exports

_EXPORTS = {
    **{name: (".node.child.ctx", name) for name in ("NodeContext",)},
    "Finding": (".driver.events.finding", "Finding"),
    **{name: (".driver.diagnosis.diagnose", name) for name in ("Snapshot", "diagnose")},
    **{name: (".driver.run.launch", name) for name in ("Run",)},
    **{name: (".driver.run.roles", name) for name in ("plan_roles",)},
    "NodeState": (".wire.states", "NodeState"),
    "RunState": (".driver.run.lifecycle", "RunState"),
    **{name: (".driver.errors", name) for name in (
        "ConfigError", "FeedError", "FeedTimeout", "LaunchError", "NodeError", "PreflightError",
        "ReservationTimeout", "ResultError", "RunStopped", "SparkJobError", "TFOSError")},
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
