"""tfos_notebook: distributed TensorFlow training on Apache Spark, driven from notebooks.

    %load_ext tfos_notebook   # in a notebook: %%tfos_train, %tfos_status, %tfos_stop, %tfos_tensorboard

    from tfos_notebook import TFCluster, InputMode
    cluster = TFCluster.run(sc, main_fun, args, num_executors=2, input_mode=InputMode.SPARK)
    cluster.train(df_or_rdd, num_epochs=3)   # main_fun reads ctx.dataset(...) or TFNode.DataFeed(ctx.mgr)
    cluster.shutdown()

    from tfos_notebook import MirroredStrategyRunner      # spark-tensorflow-distributor's runner
    MirroredStrategyRunner(num_slots=2, use_gpu=False).run(train_fn)
"""

from .compat import tfcluster as TFCluster  # noqa: N812  (TensorFlowOnSpark's module name)
from .compat import tfnode as TFNode  # noqa: N812  (TensorFlowOnSpark's module name)
from .compat import tfparallel as TFParallel  # noqa: N812  (TensorFlowOnSpark's module name)
from .compat.distributor import MirroredStrategyRunner
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
from .runtime.orphans import scan_cluster as cleanup

__version__ = "0.1.0"


def load_ipython_extension(ipython) -> None:
    """``%load_ext tfos_notebook``: register the magics. The notebook layer (and IPython) is
    imported only here, so ``import tfos_notebook`` never needs IPython."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


__all__ = ["ConfigError", "FeedError", "FeedTimeout", "InputMode", "LaunchError", "MirroredStrategyRunner",
           "NodeContext", "NodeError", "PreflightError", "ReservationTimeout", "Run", "RunStopped", "SparkJobError",
           "TFCluster", "TFNode", "TFOSError", "TFParallel", "cleanup"]
