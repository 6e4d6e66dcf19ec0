"""``TFNode`` with TensorFlowOnSpark's names, for the function that runs on each node:
``DataFeed`` reads what ``TFCluster.train``/``inference`` feed, ``hdfs_path`` resolves paths.
TensorFlow 1's ``start_cluster_server`` and ``export_saved_model`` are refused with the TensorFlow 2
way, as TensorFlowOnSpark 2 refuses them."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..runtime.node.feed.datafeed import DataFeed

__all__ = ["DataFeed", "export_saved_model", "hdfs_path", "release_port", "start_cluster_server"]


def hdfs_path(ctx: Any, path: str) -> str:
    """``path`` resolved against the cluster's default filesystem (``ctx.absolute_path(path)``):
    paths with a scheme are kept, absolute ones get ``fs.defaultFS``, relative ones the user's
    HDFS home or the driver's working directory."""
    return ctx.absolute_path(path)


def release_port(ctx: Any) -> None:
    """Free the port reserved for the node: already done before the function starts (see
    ``NodeContext.release_port``)."""
    ctx.release_port()


def start_cluster_server(ctx: Any, num_gpus: int = 1, rdma: bool = False) -> Any:
    """TensorFlow 1's ``tf.train.Server`` set-up: refused, as in TensorFlowOnSpark 2.

    Raises:
        ConfigError: always, naming the TensorFlow 2 replacement.
    """
    raise ConfigError("TFNode.start_cluster_server is TensorFlow 1 API: TF_CONFIG is already set on every node, "
                      "so create a tf.distribute strategy instead (MultiWorkerMirroredStrategy, or "
                      "ParameterServerStrategy with num_ps > 0)")


def export_saved_model(sess: Any, export_dir: str, tag_set: str, signatures: Any) -> None:
    """TensorFlow 1's session-based SavedModel export: refused, as in TensorFlowOnSpark 2.

    Raises:
        ConfigError: always, naming the TensorFlow 2 replacement.
    """
    raise ConfigError("TFNode.export_saved_model exports a TensorFlow 1 session: save the model with "
                      "model.save(path) or tf.saved_model.save(model, path) on the chief (ctx.is_chief) instead")
