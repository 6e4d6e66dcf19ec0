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
    def of(cls, data: Any, read_row: bool = True) -> DataSample:
        """The sample of ``data``; without ``read_row``, no row (no Spark job): a DataFrame's
        schema alone (where Spark's Arrow schema is known here), an RDD's nothing."""
        from pyspark import RDD
        from pyspark.sql import DataFrame

        if isinstance(data, DataFrame):
            return cls("df", *_first_row(data, read_row))
        if isinstance(data, RDD):
            first = _first_rdd_row(data) if read_row else []
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


def _pickles_batches(serializer: Any) -> bool:
    """Whether an RDD with this deserializer holds its rows as PySpark's pickled batches."""
    from pyspark.serializers import (
        AutoBatchedSerializer,
        BatchedSerializer,
        CloudPickleSerializer,
        PickleSerializer,
    )

    return (type(serializer) in (BatchedSerializer, AutoBatchedSerializer)
            and isinstance(serializer.serializer, (PickleSerializer, CloudPickleSerializer)))


def pickled_batches(data: Any) -> tuple[Any, Any]:
    """An RDD of the serialized batches that hold ``data``'s rows (read as bytes, not unpickled),
    and the pickle serializer of each batch. An RDD that PySpark does not keep as batches of
    pickled rows (text files, zipped or cartesian RDDs, a context with another serializer) is
    pickled in batches first, in the same pass."""
    from pyspark import RDD
    from pyspark.serializers import AutoBatchedSerializer, CloudPickleSerializer, NoOpSerializer

    serializer = data._jrdd_deserializer
    if not _pickles_batches(serializer):
        serializer = AutoBatchedSerializer(CloudPickleSerializer())
        data = data._reserialize(serializer)
    return RDD(data._jrdd, data.context, NoOpSerializer()), serializer.serializer


def _first_rdd_row(data: Any) -> list:
    """The RDD's first row, in a list (empty for an empty RDD). Rows the JVM holds as pickled
    batches (cached, or from ``parallelize``) are read there, as the first batch: ``take(1)``
    would have a Python worker stop part way through its partition, which PySpark then cannot
    reuse, and the next Python task on that executor (a node's, when the data is gathered with
    no Python) would wait about half a second for a fresh one."""
    from pyspark.rdd import PipelinedRDD

    if (data.is_cached or not isinstance(data, PipelinedRDD)) and _pickles_batches(data._jrdd_deserializer):
        first = data._jrdd.take(1)
        return data._jrdd_deserializer.serializer.loads(bytes(first[0]))[:1] if first else []
    return data.take(1)


def _first_row(df: Any, read: bool = True) -> tuple[pa.RecordBatch | None, pa.Schema]:
    """A DataFrame's first row as a record batch (None without ``read``), and its Arrow schema:
    the row is read with ``take(1)``, a job of one task, and made Arrow here with the schema
    Spark's own Arrow conversion gives the DataFrame (``toArrow`` of a limit would scan every
    partition)."""
    import inspect

    from pyspark.sql.pandas.types import to_arrow_schema

    rows = df.take(1) if read else []
    options = {}
    if "prefers_large_types" in inspect.signature(to_arrow_schema).parameters:  # pyspark 4; 3.5 has neither
        large = df.sparkSession.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
        options = {"timezone": "UTC", "prefers_large_types": large}
    try:
        schema = to_arrow_schema(df.schema, **options)
        return (pa.RecordBatch.from_pylist([rows[0].asDict(recursive=True)], schema=schema) if rows else None), schema
    except (TypeError, ValueError, pa.ArrowException):  # a type only Spark's JVM turns into Arrow
        table = df.limit(1).toArrow()
        return (table.combine_chunks().to_batches()[0] if table.num_rows else None), table.schema
