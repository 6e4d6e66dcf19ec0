"""Driver-side TensorBoard: an append-only mirror of the run's event files (shipped by the nodes,
or read from DBFS/HDFS/S3/any Hadoop or fsspec filesystem), one managed TensorBoard process per
run on 127.0.0.1, and the URL a browser reaches it at (jupyter-server-proxy, the Databricks driver
proxy, or local).

    from tfos_notebook.tensorboard import attach_tensorboard
    run = Run(sc, main_fun, args, 2).start()
    tb = attach_tensorboard(run)
    print(tb.url)
"""

from .attach import KEEP_AFTER_RUN_SECS, TensorBoardHandle, attach_tensorboard, serve_logdir
from .mirror import Mirror, UnsafePathError
from .process import StartLaunched, StartReused, TensorBoardError, TensorBoardInfo
from .sources import LogdirError, open_source
from .urls import ProxyPortError, tensorboard_url

__all__ = ["KEEP_AFTER_RUN_SECS", "LogdirError", "Mirror", "ProxyPortError", "StartLaunched", "StartReused",
           "TensorBoardError", "TensorBoardHandle", "TensorBoardInfo", "UnsafePathError", "attach_tensorboard",
           "open_source", "serve_logdir", "tensorboard_url"]
