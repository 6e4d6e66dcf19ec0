"""Inference over the network (``Run.inference``): the nodes' predictions for every row of a
DataFrame or RDD, computed lazily by Spark tasks that send their rows to the nodes' data feeds and
read the answers back on the same connection."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...wire.feed.codec import schema_for_sample
from ...wire.feed.tasks import InferFeed
from ..errors import FeedError
from .data import DataSample

if TYPE_CHECKING:
    from ...wire.channel import RunSecret
    from .feeder import Feeder


def inference(feeder: Feeder, data: Any, feed_timeout: float = 600.0, schema: Any = None,
              keep: list[str] | None = None) -> Any:
    """See :meth:`Run.inference`."""
    from pyspark import RDD
    from pyspark.sql import DataFrame

    if not isinstance(data, (DataFrame, RDD)):
        raise FeedError(f"expected a Spark DataFrame or RDD, got {type(data).__name__}")
    if feeder.ended:
        raise FeedError("the feed was already ended (shutdown or train(..., end_feed=True)): run inference "
                        "before ending the feed")
    feeder.check_slots()
    feeder.raise_if_run_ended()
    addresses = feeder.wait_for_feeds(feed_timeout)
    feeder.handed_out = True
    secret = feeder.secret()
    ask = {"driver": feeder.run.control_address, "tasks": tuple(nd.task for nd in feeder.trainers())}
    if isinstance(data, RDD):
        first = data.take(1)
        if not first:
            return data
        rdd_schema = schema_for_sample(first[0]).serialize().to_pybytes()
        return data.mapPartitionsWithIndex(
            InferFeed(secret, addresses, feed_timeout, rdd_schema, **ask).rdd_partition)
    keep = list(data.columns) if keep is None else list(keep)
    missing = [c for c in keep if c not in data.columns]
    if missing:
        raise FeedError(f"keep names columns {missing} that the DataFrame lacks; it has {data.columns}")
    predictions = _prediction_schema(secret, data, schema, addresses, feed_timeout)
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    clash = [f.name for f in predictions.fields if f.name in keep]
    if clash:
        raise FeedError(f"prediction columns {clash} clash with kept input columns: rename them, or pass keep=")
    out = StructType([data.schema[c] for c in keep] + list(predictions.fields))
    task = InferFeed(secret, addresses, feed_timeout, keep=keep,
                     out_schema=to_arrow_schema(out).serialize().to_pybytes(), **ask)
    return data.mapInArrow(task.arrow_partition, out)

def _prediction_schema(secret: RunSecret, data, schema: Any, addresses, feed_timeout: float):
    """The predictions' columns: ``schema``'s, or those of the nodes' answer for the first row."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructType

    if isinstance(schema, StructType):
        return schema
    if isinstance(schema, str):
        return data.sparkSession.createDataFrame([], schema).schema
    if schema is not None:
        raise FeedError(f"schema must be a DDL string or a StructType, got {type(schema).__name__}")
    first = DataSample.of(data).sample  # a one-row job (pyspark 3.5 has no DataFrame.toArrow)
    if first is None:
        raise FeedError("the DataFrame is empty, so the predictions' schema cannot be learned from the "
                        "nodes: pass schema= (e.g. 'prediction double')")
    probe = InferFeed(secret, addresses, feed_timeout)
    answers = list(probe.run(0, 0, iter([first])))
    return from_arrow_schema(answers[0][1].schema)
