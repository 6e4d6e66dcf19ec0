"""TensorFlowOnSpark's ``TFNode`` module, by its name, for the function each node runs:
``DataFeed``, ``hdfs_path``, ``release_port``, and TensorFlowOnSpark 2's refusals of TensorFlow 1
calls. Implemented in ``peers/tfnode.py`` over the runtime."""

from .peers.tfnode import (
    DataFeed,
    batch_results,
    export_saved_model,
    hdfs_path,
    next_batch,
    release_port,
    start_cluster_server,
    terminate,
)

__all__ = ["DataFeed", "batch_results", "export_saved_model", "hdfs_path", "next_batch", "release_port",
           "start_cluster_server", "terminate"]
