"""Driver-side TensorBoard: an append-only mirror of the run's event files (shipped by the nodes,
or read from DBFS/HDFS/S3/any Hadoop or fsspec filesystem), one managed TensorBoard process per
run on 127.0.0.1, and the URL a browser reaches it at (jupyter-server-proxy, the Databricks driver
proxy, or local).

    from tfos_notebook.tensorboard import attach_tensorboard
    run = Run(sc, main_fun, args, 2).start()
    tb = attach_tensorboard(run)
    print(tb.url)

The names below are imported on first use (see ``lazy.py``): the Jupyter server extension imports
``urls`` without the mirror, the processes and their sources.
"""

from __future__ import annotations

from ..lazy import lazy_exports

_EXPORTS = {
    **{name: (".attach", name) for name in (
        "KEEP_AFTER_RUN_SECS", "TensorBoardHandle", "attach_tensorboard", "serve_logdir")},
    **{name: (".mirror", name) for name in ("Mirror", "UnsafePathError")},
    **{name: (".process", name) for name in ("StartLaunched", "StartReused", "TensorBoardError", "TensorBoardInfo")},
    **{name: (".sources", name) for name in ("LogdirError", "open_source")},
    **{name: (".urls", name) for name in ("ProxyPortError", "tensorboard_url")},
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
