"""In-stage feeding's shared part: what the driver tells each node about the data its own barrier
task holds (``InStage``, in ``NodePlan``), and the shape of what those tasks return."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

#: The column that carries a DataFrame row's destination through the shuffle (dropped after).
FEED_KEY = "_tfos_feed_key"
#: What a DataFrame's barrier tasks return: one row per summary (train) or result batch (infer).
OUTPUT_DDL = "task int, payload binary"
OUTPUT_SCHEMA = pa.schema([("task", pa.int32()), ("payload", pa.binary())])


@dataclass(frozen=True)
class InStage:
    """What the nodes need to feed themselves; travels in ``NodePlan``.

    ``mode``: ``train`` or ``infer``; ``kind``: ``df`` (Arrow batches) or ``rdd`` (rows, made
    batches with ``rdd_schema``); ``sample``: one row (or the schema) for ``ctx.dataset``'s types;
    ``timeout``: seconds a node may take no data before its task gives up."""

    mode: str
    kind: str
    epochs: int
    sample: bytes
    rdd_schema: bytes | None = None
    keep: tuple[str, ...] = ()
    timeout: float = 600.0
