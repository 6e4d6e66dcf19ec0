"""What a feed knows of its data before feeding it, and what it reports after."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ...wire.feed.codec import batch_bytes, empty_stream, rows_to_batch, schema_for_sample
from ..errors import FeedError


@dataclass(frozen=True)
class FeedSummary:
    """What ``train`` fed: ``epochs`` completed, ``rows`` delivered in all (each row once per
    epoch), ``rows_per_node`` by ``role:index``, and ``stopped_early`` when some node called
    ``terminate()`` or returned before all its data was fed (feeding goes on for the others until
    every node has stopped)."""

    epochs: int
    rows: int
    seconds: float
    stopped_early: bool = False
    rows_per_node: dict[str, int] = field(default_factory=dict)


@dataclass
class DataSample:
    """What the nodes learn of the data before it is fed: its kind (``df`` or ``rdd``), one row
    (``sample``) and its Arrow schema, read on the driver with a one-row Spark job."""

    kind: str  # "df" or "rdd"
    sample: pa.RecordBatch | None
    schema: pa.Schema | None

    @classmethod
    def of(cls, data: Any) -> DataSample:
        from pyspark import RDD
        from pyspark.sql import DataFrame

        if isinstance(data, DataFrame):
            table = data.limit(1).toArrow()
            batch = table.combine_chunks().to_batches()[0] if table.num_rows else None
            return cls("df", batch, table.schema)
        if isinstance(data, RDD):
            first = data.take(1)
            if not first:
                return cls("rdd", None, None)
            schema = schema_for_sample(first[0])
            return cls("rdd", rows_to_batch(first, schema), schema)
        raise FeedError(f"expected a Spark DataFrame or RDD, got {type(data).__name__}: make one with "
                        "spark.createDataFrame(...) or sc.parallelize(...)")

    @property
    def rdd_schema(self) -> bytes | None:
        return self.schema.serialize().to_pybytes() if self.kind == "rdd" and self.schema is not None else None

    def sample_bytes(self) -> bytes:
        if self.sample is not None:
            return batch_bytes(self.sample).to_pybytes()
        return empty_stream(self.schema if self.schema is not None else pa.schema([])).to_pybytes()
