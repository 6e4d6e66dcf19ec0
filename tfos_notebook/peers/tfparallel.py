"""``TFParallel`` with TensorFlowOnSpark's names: independent, single-node copies of a function on
the executors (parallel inference, hyper-parameter sweeps), gang-scheduled, without a cluster."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..tracking.run import TrackedRun


@dataclass
class IndependentNode:
    """Runs ``map_fn(tf_args, ctx)`` as a single-node program: no ``TF_CONFIG``, so a strategy
    made by ``map_fn`` trains alone."""

    map_fn: Callable[[Any, Any], Any]

    def __call__(self, tf_args: Any, ctx: Any) -> Any:
        os.environ.pop("TF_CONFIG", None)
        return self.map_fn(tf_args, ctx)


def run(sc, map_fn: Callable[[Any, Any], Any], tf_args: Any, num_executors: int, use_barrier: bool = True,
        **kwargs: Any) -> list[Any]:
    """Run ``map_fn(tf_args, ctx)`` on ``num_executors`` Spark tasks at once, each on its own.

    ``ctx.executor_id`` (``ctx.worker_num``) is the copy's number and ``ctx.num_workers`` the count
    of copies. The tasks always run as one barrier stage (``use_barrier`` is accepted for
    TensorFlowOnSpark's signature): all start together, and a failure stops them all.

    Args:
        kwargs: passed to :class:`tfos_notebook.Run` (``gpus_per_node``, ``env``...).

    Returns:
        The value of each copy, in executor order (TensorFlowOnSpark returned None).

    Raises:
        PreflightError: fewer free task slots than ``num_executors``. NodeError: a copy failed.
    """
    handle = TrackedRun(sc, IndependentNode(map_fn), tf_args, num_executors, master_node=None, independent=True,
                        **kwargs)
    handle.start().wait()
    return [handle.results.get(f"worker:{i}") for i in range(num_executors)]
