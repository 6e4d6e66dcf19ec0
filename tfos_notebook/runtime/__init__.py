"""Spark + TensorFlow mechanics: no IPython, widget or Jupyter imports here, and TensorFlow is
imported only inside the nodes' processes."""

from .ctx import NodeContext
from .diagnose import Finding, Snapshot, diagnose
from .errors import (
           FeedError,
           FeedTimeout,
           LaunchError,
           NodeError,
           PreflightError,
           ReservationTimeout,
           RunStopped,
           SparkJobError,
           TFOSError,
)
from .launch import ConfigError, Run, plan_roles

__all__ = ["ConfigError", "FeedError", "FeedTimeout", "Finding", "LaunchError", "NodeContext", "NodeError", "PreflightError",
           "ReservationTimeout", "Run", "RunStopped", "Snapshot", "SparkJobError", "TFOSError", "diagnose",
           "plan_roles"]
