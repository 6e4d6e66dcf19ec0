"""tfos_notebook: distributed TensorFlow training on Apache Spark, driven from notebooks.

    from tfos_notebook import TFCluster, InputMode
    cluster = TFCluster.run(sc, main_fun, args, num_executors=2, input_mode=InputMode.SPARK)
    cluster.train(df_or_rdd, num_epochs=3)   # main_fun reads ctx.dataset(...) or TFNode.DataFeed(ctx.mgr)
    cluster.shutdown()
"""

from .compat import tfcluster as TFCluster  # noqa: N812  (TensorFlowOnSpark's module name)
from .compat import tfnode as TFNode  # noqa: N812  (TensorFlowOnSpark's module name)
from .compat.tfcluster import InputMode
from .runtime import (
    ConfigError,
    FeedError,
    FeedTimeout,
    LaunchError,
    NodeContext,
    NodeError,
    PreflightError,
    ReservationTimeout,
    Run,
    RunStopped,
    SparkJobError,
    TFOSError,
)

__version__ = "0.1.0"

__all__ = ["ConfigError", "FeedError", "FeedTimeout", "InputMode", "LaunchError", "NodeContext", "NodeError", "PreflightError",
           "ReservationTimeout", "Run", "RunStopped", "SparkJobError", "TFCluster", "TFNode", "TFOSError"]
