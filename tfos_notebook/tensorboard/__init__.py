"""Driver-side TensorBoard: an append-only mirror of the run's event files (shipped by the nodes,
or read from DBFS/HDFS/S3/any Hadoop or fsspec filesystem), one managed TensorBoard process per
run on 127.0.0.1, and the URL a browser reaches it at (jupyter-server-proxy, the Databricks driver
proxy, or local).
"""

from .mirror import Mirror, UnsafePathError
from .process import StartLaunched, StartReused, TensorBoardError, TensorBoardInfo
from .sources import LogdirError, open_source
from .urls import ProxyPortError, tensorboard_url

__all__ = ["LogdirError", "Mirror", "ProxyPortError", "StartLaunched", "StartReused", "TensorBoardError",
           "TensorBoardInfo", "UnsafePathError", "open_source", "tensorboard_url"]
