"""What each barrier task runs first on an executor: the task bodies the Spark backends submit.

Spark's Python worker unpickles a task's body, and so imports the module that defines it, before
anything of the task runs. This module imports nothing beyond the standard library and msgpack,
so that a node's task starts its node's process (``node/task/task.py``) without first loading pyarrow
and the driver's backend modules: they load while the process starts, where they are needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

#: A barrier task's body: ``fn(partition_id, gpu_addresses) -> dict`` (one small, msgpack-able
#: summary per task, collected by the driver).
BarrierFn = Callable[[int, list[str]], dict]
#: A barrier task's body over data: ``fn(partition_id, gpu_addresses, items)`` where ``items`` is
#: the task's partition (Arrow record batches of a DataFrame, rows of an RDD); what it yields is the
#: task's output (record batches of the output schema for a DataFrame, objects for an RDD).
DataBarrierFn = Callable[[int, list[str], Iterator], Iterable]


def gpu_addresses(task_context: Any) -> list[str]:
    """The GPU addresses Spark gave the task of ``task_context`` (a ``TaskContext``)."""
    resources = task_context.resources()
    return list(resources["gpu"].addresses) if "gpu" in resources else []


def barrier_task_context() -> tuple[int, list[str]]:
    """Inside a barrier task: its partition id and the GPU addresses Spark gave it."""
    from pyspark import BarrierTaskContext

    ctx = BarrierTaskContext.get()
    return ctx.partitionId(), gpu_addresses(ctx)


class BarrierTask:
    """The body of each task of a classic barrier stage with no data: ``fn(partition id, GPU
    addresses)``, its summary the task's one output."""

    def __init__(self, fn: BarrierFn) -> None:
        self.fn = fn

    def __call__(self, _rows: Any) -> Any:
        yield self.fn(*barrier_task_context())


class RddBarrierTask:
    """The body of each task of a classic barrier stage over an RDD: ``fn(partition id, GPU
    addresses, the partition's rows)``."""

    def __init__(self, fn: DataBarrierFn) -> None:
        self.fn = fn

    def __call__(self, rows: Any) -> Any:
        yield from self.fn(*barrier_task_context(), rows)


class ArrowBarrierTask:
    """The body of each task of a barrier ``mapInArrow``: ``fn(partition id, GPU addresses, the
    partition's record batches)``."""

    def __init__(self, fn: DataBarrierFn) -> None:
        self.fn = fn

    def __call__(self, batches: Iterator) -> Iterator:
        yield from self.fn(*barrier_task_context(), batches)


class PackedBarrierTask:
    """The body of each task of a Spark Connect barrier stage with no data (a barrier
    ``mapInArrow``): ``fn(partition id, GPU addresses)``, its dict returned msgpack-packed beside
    the partition id."""

    def __init__(self, fn: BarrierFn) -> None:
        self.fn = fn

    def __call__(self, batches: Iterator) -> Iterator:
        import msgpack
        import pyarrow as pa

        from .feed.buffers import binary_array, values_array  # not pa.array: it imports pandas

        for _ in batches:
            pass
        part, gpus = barrier_task_context()
        summary = msgpack.packb(self.fn(part, gpus))
        yield pa.RecordBatch.from_arrays([values_array([part], pa.int32()), binary_array([summary])],
                                         names=["part", "summary"])
