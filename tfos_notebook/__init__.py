"""tfos_notebook: distributed TensorFlow training on Apache Spark, driven from notebooks.

    %load_ext tfos_notebook   # in a notebook: %%tfos_train, %tfos_status, %tfos_stop, %tfos_tensorboard

    from tfos_notebook import TFCluster, InputMode
    cluster = TFCluster.run(sc, main_fun, args, num_executors=2, input_mode=InputMode.SPARK)
    cluster.train(df_or_rdd, num_epochs=3)   # main_fun reads ctx.dataset(...) or TFNode.DataFeed(ctx.mgr)
    cluster.shutdown()

    from tfos_notebook import MirroredStrategyRunner      # spark-tensorflow-distributor's runner
    MirroredStrategyRunner(num_slots=2, use_gpu=False).run(train_fn)

The names below are imported on first use: a node's process imports this package on every launch
and must not pay for pyspark, numpy and pyarrow before it runs the user's function.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # name: (module, attribute or None for the module itself)
    "TFCluster": (".compat.tfcluster", None),  # TensorFlowOnSpark's module names
    "TFNode": (".compat.tfnode", None),
    "TFParallel": (".compat.tfparallel", None),
    "MirroredStrategyRunner": (".compat.distributor", "MirroredStrategyRunner"),
    "InputMode": (".compat.tfcluster", "InputMode"),
    "Run": (".runtime.launch", "Run"),
    "NodeContext": (".runtime.ctx", "NodeContext"),
    "cleanup": (".runtime.orphans", "scan_cluster"),
    **{name: (".runtime.errors", name) for name in (
        "ConfigError", "FeedError", "FeedTimeout", "LaunchError", "NodeError", "PreflightError",
        "ReservationTimeout", "RunStopped", "SparkJobError", "TFOSError")},
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _EXPORTS[name]
    value = importlib.import_module(module, __name__)
    value = value if attr is None else getattr(value, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


def load_ipython_extension(ipython) -> None:
    """``%load_ext tfos_notebook``: register the magics. The notebook layer (and IPython) is
    imported only here, so ``import tfos_notebook`` never needs IPython."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)
