"""``TFNode`` with TensorFlowOnSpark's names, for the function that runs on each node:
``DataFeed`` reads what ``TFCluster.train``/``inference`` feed, ``hdfs_path`` resolves paths,
``release_port`` frees the node's reserved port. TensorFlow 1's ``start_cluster_server`` and
``export_saved_model`` and the module-level feed functions TensorFlowOnSpark 2 had already
deprecated are refused, each naming its replacement, as TensorFlowOnSpark 2 refuses them."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..runtime.host.paths import absolute_path
from ..runtime.node.child.ctx import release_port, tf1_refused
from ..runtime.node.child.feed.datafeed import DataFeed

__all__ = ["DataFeed", "batch_results", "export_saved_model", "hdfs_path", "next_batch", "release_port",
           "start_cluster_server", "terminate"]


def hdfs_path(ctx: Any, path: str) -> str:
    """``path`` resolved against the cluster's default filesystem. ``ctx`` is any object with
    ``defaultFS`` (``file://``, ``hdfs://namenode:8020``...) and ``working_dir``: a path with a
    scheme is kept, an absolute one gets ``defaultFS`` as prefix, a relative one the user's home
    (``/user/<name>``) on HDFS or ``working_dir`` on a local filesystem."""
    return absolute_path(ctx.defaultFS, ctx.working_dir, path)


def start_cluster_server(ctx: Any, num_gpus: int = 1, rdma: bool = False) -> Any:
    """TensorFlow 1's ``tf.train.Server`` set-up: refused, as in TensorFlowOnSpark 2.

    Raises:
        ConfigError: always, naming the TensorFlow 2 replacement.
    """
    raise tf1_refused("start_cluster_server")


def export_saved_model(sess: Any, export_dir: str, tag_set: str, signatures: Any) -> None:
    """TensorFlow 1's session-based SavedModel export: refused, as in TensorFlowOnSpark 2.

    Raises:
        ConfigError: always, naming the TensorFlow 2 replacement.
    """
    raise tf1_refused("export_saved_model")


def _replaced_by_datafeed(call: str) -> ConfigError:
    return ConfigError(f"TFNode.{call}(mgr, ...) was removed (TensorFlowOnSpark 2 deprecated it too): use "
                       f"feed = TFNode.DataFeed(ctx.mgr) and feed.{call}(...)")


def next_batch(mgr: Any, batch_size: int, qname: str = "input") -> Any:
    """Refused, as in TensorFlowOnSpark 2: use ``DataFeed(ctx.mgr).next_batch``."""
    raise _replaced_by_datafeed("next_batch")


def batch_results(mgr: Any, results: Any, qname: str = "output") -> None:
    """Refused, as in TensorFlowOnSpark 2: use ``DataFeed(ctx.mgr).batch_results``."""
    raise _replaced_by_datafeed("batch_results")


def terminate(mgr: Any, qname: str = "input") -> None:
    """Refused, as in TensorFlowOnSpark 2: use ``DataFeed(ctx.mgr).terminate``."""
    raise _replaced_by_datafeed("terminate")
