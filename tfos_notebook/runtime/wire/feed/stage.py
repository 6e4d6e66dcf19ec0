"""In-stage feeding's shared part: what the driver tells each node about the data its own barrier
task holds (``InStage``, in ``NodePlan``), the shape of what those tasks return, and how an RDD's
rows are dealt out to the nodes (``Dealer``, run in the tasks that write the shuffle; the node's
task reads what it wrote with ``dealt_batches``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from .codec import batch_bytes, rows_to_batch
from .protocol import FRAME_BYTES

#: The column that carries a DataFrame row's destination through the shuffle (dropped after).
FEED_KEY = "_tfos_feed_key"
#: What a DataFrame's barrier tasks return: one row per summary (train) or result batch (infer).
OUTPUT_DDL = "task int, payload binary"
OUTPUT_SCHEMA = pa.schema([("task", pa.int32()), ("payload", pa.binary())])


@dataclass(frozen=True)


class InStage:
    """What the nodes need to feed themselves; travels in ``NodePlan``.

    ``mode``: ``train`` or ``infer``; ``kind``: ``df`` (Arrow batches) or ``rdd`` (rows, made
    batches with ``rdd_schema``); ``dealt``: an RDD's rows reach the node's task already gathered
    into Arrow IPC streams (``Dealer``), not one by one; ``sample``: one row (or the schema) for
    ``ctx.dataset``'s types; ``timeout``: seconds a node may take no data before its task gives up."""

    mode: str
    kind: str
    epochs: int
    sample: bytes
    rdd_schema: bytes | None = None
    keep: tuple[str, ...] = ()
    timeout: float = 600.0
    dealt: bool = False


@dataclass(frozen=True)


class Dealer:
    """Deals an RDD partition's rows round-robin to the training tasks, gathered into few large
    records: ``(task, Arrow IPC stream of about frame_bytes)``, for ``mapPartitionsWithIndex``.

    Row ``i`` of partition ``p`` goes to ``trainers[(p + i) % len(trainers)]``, so every node gets
    an even share. Through the shuffle then go a few records per node and partition instead of a
    pickled object per row, and the rows become Arrow once, here, on the map side; the node's task
    forwards the batches as they come. ``schema``: the Arrow schema (IPC bytes) that the driver
    derived from the first row, so every partition agrees on the types."""

    trainers: tuple[int, ...]
    schema: bytes
    frame_bytes: int = FRAME_BYTES

    def __call__(self, index: int, rows: Iterable) -> Iterator[tuple[int, bytes]]:
        schema = pa.ipc.read_schema(pa.py_buffer(self.schema))
        k = len(self.trainers)
        held: list[list] = [[] for _ in range(k)]
        size = 256  # rows per record, until the first record's bytes per row are known
        for i, row in enumerate(rows):
            target = (index + i) % k
            held[target].append(row)
            if len(held[target]) >= size:
                batch = rows_to_batch(held[target], schema)
                held[target] = []
                size = max(1, min(65536, self.frame_bytes * batch.num_rows // max(1, batch.nbytes)))
                yield self.trainers[target], batch_bytes(batch).to_pybytes()
        for target, chunk in enumerate(held):
            if chunk:
                yield self.trainers[target], batch_bytes(rows_to_batch(chunk, schema)).to_pybytes()


def dealt_batches(records: Iterable[bytes]) -> Iterator[pa.RecordBatch]:
    """The record batches of the records a ``Dealer`` sent to this task (zero-copy)."""
    for record in records:
        yield from pa.ipc.open_stream(pa.py_buffer(record))
