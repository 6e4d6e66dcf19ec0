"""tfos_notebook: distributed TensorFlow training on Apache Spark, driven from notebooks.

    %load_ext tfos_notebook   # in a notebook: %%tfos_train, %%tfos_sweep, %tfos_status, %tfos_stop, %tfos_tensorboard

    from tfos_notebook import TFCluster, InputMode
    cluster = TFCluster.run(sc, main_fun, args, num_executors=2, input_mode=InputMode.SPARK)
    cluster.train(df_or_rdd, num_epochs=3)   # main_fun reads ctx.dataset(...) or TFNode.DataFeed(ctx.mgr)
    cluster.shutdown()

    # TensorFlowOnSpark programs change only their import line:
    from tfos_notebook import compat, dfutil, TFCluster, TFNode, TFParallel
    from tfos_notebook.pipeline import TFEstimator, TFModel

    from tfos_notebook import MirroredStrategyRunner      # spark-tensorflow-distributor's runner
    MirroredStrategyRunner(num_slots=2, use_gpu=False).run(train_fn)

The names below are imported on first use (see ``lazy.py``).
"""

from __future__ import annotations

import sys

if sys.version_info < (3, 10):  # noqa: UP036 (pip refuses such an install, requires-python; a path may not)
    raise ImportError(f"tfos_notebook needs Python 3.10 or newer (the oldest a Databricks Runtime LTS for Machine "
                      f"Learning it supports runs); this is Python {sys.version.split()[0]}")

from .lazy import lazy_exports  # noqa: E402

__version__ = "0.1.0"

_EXPORTS = {
    # name: (module, attribute or None for the module itself)
    # TensorFlowOnSpark's modules, by its names (thin modules over peers/ and the runtime)
    **{name: (f".{name}", None) for name in ("TFCluster", "TFNode", "TFParallel", "TFManager", "compat", "dfutil",
                                            "pipeline")},
    "MirroredStrategyRunner": (".peers.distributor", "MirroredStrategyRunner"),
    "InputMode": (".peers.tfcluster", "InputMode"),
    "Run": (".tracking.run", "TrackedRun"),
    "sweep": (".notebook.sweeps", "sweep"),
    "NodeContext": (".runtime.node.child.ctx", "NodeContext"),
    "cleanup": (".runtime.driver.diagnosis.cleanup", "scan_cluster"),
    "ExportError": (".runtime.node.child.export", "ExportError"),
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
