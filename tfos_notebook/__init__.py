"""tfos_notebook: distributed TensorFlow training on Apache Spark, driven from notebooks.

    %load_ext tfos_notebook   # in a notebook: %%tfos_train, %tfos_status, %tfos_stop, %tfos_tensorboard

    from tfos_notebook import TFCluster, InputMode
    cluster = TFCluster.run(sc, main_fun, args, num_executors=2, input_mode=InputMode.SPARK)
    cluster.train(df_or_rdd, num_epochs=3)   # main_fun reads ctx.dataset(...) or TFNode.DataFeed(ctx.mgr)
    cluster.shutdown()

    from tfos_notebook import MirroredStrategyRunner      # spark-tensorflow-distributor's runner
    MirroredStrategyRunner(num_slots=2, use_gpu=False).run(train_fn)

The names below are imported on first use (see ``lazy.py``).
"""

from __future__ import annotations

from .lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    # name: (module, attribute or None for the module itself)
    "TFCluster": (".peers.tfcluster", None),  # TensorFlowOnSpark's module names
    "TFNode": (".peers.tfnode", None),
    "TFParallel": (".peers.tfparallel", None),
    "MirroredStrategyRunner": (".peers.distributor", "MirroredStrategyRunner"),
    "InputMode": (".peers.tfcluster", "InputMode"),
    "Run": (".runtime.driver.launch", "Run"),
    "NodeContext": (".runtime.node.ctx", "NodeContext"),
    "cleanup": (".runtime.driver.cleanup", "scan_cluster"),
    **{name: (".runtime.driver.errors", name) for name in (
        "ConfigError", "FeedError", "FeedTimeout", "LaunchError", "NodeError", "PreflightError",
        "ReservationTimeout", "RunStopped", "SparkJobError", "TFOSError")},
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)


def load_ipython_extension(ipython) -> None:
    """``%load_ext tfos_notebook``: register the magics. The notebook layer (and IPython) is
    imported only here, so ``import tfos_notebook`` never needs IPython."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)
