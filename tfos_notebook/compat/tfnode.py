"""``TFNode`` with TensorFlowOnSpark's names, for the function that runs on each node:
``DataFeed`` reads what ``TFCluster.train``/``inference`` feed, ``hdfs_path`` resolves paths."""

from __future__ import annotations

from typing import Any

from ..runtime.datafeed import DataFeed

__all__ = ["DataFeed", "hdfs_path"]


def hdfs_path(ctx: Any, path: str) -> str:
    """``path`` resolved against the cluster's default filesystem (``ctx.absolute_path(path)``):
    paths with a scheme are kept, absolute ones get ``fs.defaultFS``, relative ones the user's
    HDFS home or the driver's working directory."""
    return ctx.absolute_path(path)
