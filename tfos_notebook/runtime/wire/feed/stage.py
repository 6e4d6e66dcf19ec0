"""In-stage feeding's shared part: what the driver tells each node about the data its own barrier
task holds (``InStage``, in ``NodePlan``), the shape of what those tasks return, and how an RDD's
rows are dealt out to the nodes (``Dealer``, run in the tasks that write the shuffle; the node's
task reads what it wrote with ``pickled.dealt_batches``, or row by row with ``dealt_rows``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any

#: The column that carries a DataFrame row's destination through the shuffle (dropped after).
FEED_KEY = "_tfos_feed_key"
#: What a DataFrame's barrier tasks return: one row per summary (train) or result batch (infer).
#: (No pyarrow here: a node's task unpickles ``InStage`` before it starts the node's process.)
OUTPUT_DDL = "task int, payload binary"


@dataclass(frozen=True)


class InStage:
    """What the nodes need to feed themselves; travels in ``NodePlan``.

    ``mode``: ``train`` or ``infer``; ``kind``: ``df`` (Arrow batches) or ``rdd`` (rows, made
    batches in the schema of the partition's first row); ``dealt``: the serializer of an RDD's rows
    when they reach the node's task as serialized batches of rows (dealt out by a ``Dealer``, or
    gathered whole), None when they come as rows; ``sample``: what a node whose partition is empty
    gets for ``ctx.dataset``'s types (a DataFrame's schema; an RDD's, no schema: the others take
    their partition's first row); ``timeout``: seconds a node may take no data before its task
    gives up."""

    mode: str
    kind: str
    epochs: int
    sample: bytes
    keep: tuple[str, ...] = ()
    timeout: float = 600.0
    dealt: Any = None


@dataclass(frozen=True)


class Dealer:
    """Deals an RDD partition's rows to the training tasks as PySpark serialized them, for
    ``mapPartitionsWithIndex`` over the RDD's serialized batches (bytes): yields ``(task, batch)``.

    PySpark keeps an RDD's rows as pickled batches (about 64 KiB each for its default serializer),
    and the map side need not unpickle them to deal them out: each batch goes whole to the
    training task that has been sent the fewest bytes of this partition so far (ties to the
    partition's own turn, so that partitions start at different tasks). A node's share is then even
    to within one batch per partition, and the rows are unpickled once, in the node's own task.
    A partition of fewer than ``min_batches`` batches per task (small data, or few large batches
    such as ``parallelize`` makes) is dealt row by row instead: row ``i`` of partition ``p`` to
    ``trainers[(p + i) % len(trainers)]``, each task's rows pickled again as one batch, so that small
    data is still shared evenly. ``serializer``: what pickled each batch (the RDD's own)."""

    trainers: tuple[int, ...]
    serializer: Any
    min_batches: int = 8

    def __call__(self, index: int, batches: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
        k = len(self.trainers)
        batches = iter(batches)
        head = list(islice(batches, self.min_batches * k))
        if len(head) < self.min_batches * k:
            yield from self._rows(index, head)
            return
        sent = [0] * k
        turns = [(index + j) % k for j in range(k)]
        for batch in chain(head, batches):
            target = min(turns, key=sent.__getitem__)
            sent[target] += len(batch)
            yield self.trainers[target], batch

    def _rows(self, index: int, batches: list[bytes]) -> Iterator[tuple[int, bytes]]:
        k = len(self.trainers)
        held: list[list] = [[] for _ in range(k)]
        i = index
        for batch in batches:
            for row in self.serializer.loads(batch):
                held[i % k].append(row)
                i += 1
        for target, rows in enumerate(held):
            if rows:
                yield self.trainers[target], self.serializer.dumps(rows)


def dealt_rows(records: Iterable[bytes], serializer: Any) -> Iterator:
    """The rows of the serialized batches a ``Dealer`` sent to this task."""
    for record in records:
        yield from serializer.loads(record)
