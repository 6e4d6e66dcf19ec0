"""What the barrier task of a node fed in-stage does while its node runs (``fednode.py``): it streams
its partition to the node's own data feed over loopback, epoch after epoch (with more epochs than
one, the partition goes to a node-local Arrow spill as it is read, and the node's feed reads each
batch there, ``wire/feed/spill.py``), or sends its rows for inference and returns the predictions as
the task's output."""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ....wire import channel
from ....wire.errors import DataError, FeedError
from ....wire.feed import messages as fm
from ....wire.feed.buffers import binary_array, values_array, without_column
from ....wire.feed.codec import batch_bytes
from ....wire.feed.pickled import rdd_batches
from ....wire.feed.predictions import result_values
from ....wire.feed.protocol import FRAME_BYTES, tell
from ....wire.feed.spill import Spill
from ....wire.feed.stage import FEED_KEY, InStage
from ....wire.feed.tasks import TASK_TIMEOUT_MARGIN, InferFeed, TrainFeed
from .localfeed import LocalFeed
from .readahead import ReadAhead

log = logging.getLogger(__name__)

#: What a DataFrame's barrier tasks return, as Arrow (``stage.OUTPUT_DDL``).
OUTPUT_SCHEMA = pa.schema([("task", pa.int32()), ("payload", pa.binary())])


def _batches(spec: InStage, items: Iterator) -> Iterator[pa.RecordBatch]:
    if spec.kind == "df":
        return (without_column(b, FEED_KEY) if FEED_KEY in b.schema.names else b for b in items)
    # an RDD's rows (or PySpark's pickled batches of them, dealt out or gathered: ``spec.dealt``)
    return rdd_batches(items, spec.dealt, FRAME_BYTES)


def feed_node(spec: InStage, secret: channel.Secret, run_id: str, task: int, items: Iterator, local: LocalFeed,
              ahead_bytes: int = 64 << 20) -> Iterator:
    """Stream this task's partition to its own node: every epoch (training), or once with the
    predictions yielded as they come (inference). The partition is read from Spark (and spilled,
    for later epochs) up to ``ahead_bytes`` ahead of the node, starting while the node's process
    still starts. Returns at once when the node never served a feed (it failed or was stopped:
    the run's error says why). Rows it cannot read (a ``DataError``) fail the node's function
    with that error, where it reads the feed."""
    spill = Spill(run_id, task) if spec.mode == "train" and spec.epochs > 1 else None
    first = _batches(spec, items)
    ahead = ReadAhead(spill.tee(first) if spill is not None else first, ahead_bytes)
    try:
        address = local.wait()
        if address is None:
            return
        try:
            yield from _feed(spec, secret, task, address, iter(ahead), spill)
        except DataError as e:  # the node's function raises it where it reads, the run's error naming the node
            with contextlib.suppress(OSError):
                tell(address, secret, fm.Fail(str(e)))
            raise
    finally:
        ahead.close()
        if spill is not None:
            spill.delete()


def _sample(spec: InStage, batches: Iterator[pa.RecordBatch]) -> tuple[bytes, Iterator[pa.RecordBatch]]:
    """The sample the node gets (``ctx.dataset``'s shapes), and the batches to feed: the first row
    of this node's own partition (the driver reads no row: a job fewer before the gang), or when
    the partition is empty what the driver sent: a DataFrame's schema, an RDD's nothing."""
    head = next(batches, None)
    if head is None:
        return spec.sample, iter(())
    return batch_bytes(head.slice(0, 1)).to_pybytes(), itertools.chain([head], batches)


def _feed(spec: InStage, secret: channel.Secret, task: int, address: tuple[str, int], first: Iterator[pa.RecordBatch],
          spill: Spill | None) -> Iterator:
    timeout = spec.timeout + TASK_TIMEOUT_MARGIN
    sample, first = _sample(spec, first)
    tell(address, secret, fm.Sample("in-stage", sample))
    if spec.mode == "infer":
        infer = InferFeed(secret, [address], timeout, keep=list(spec.keep))
        for kept, results in infer.run(task, 0, first):
            out = results if kept is None or not kept.num_columns else _join(kept, results)
            yield result_values(out) if spec.kind == "rdd" else batch_bytes(out).to_pybytes()
        tell(address, secret, fm.End())
        return
    fed: list[int] = []
    try:
        for epoch in range(spec.epochs):
            # with more epochs than one, the node reads every batch from the spill, where it was written
            source = first if spill is None else spill.references(first) if epoch == 0 else iter(spill.entries)
            pass_id = f"in-stage.{epoch}"
            record = TrainFeed(secret, [address], pass_id, timeout).feed(task, 0, source)
            fed.append(record["rows"] + record["skipped"])
            if record["status"] == "timeout":
                raise FeedError(f"node task {task} took no data for {spec.timeout:.0f}s: its function is not "
                                "reading the feed (ctx.dataset / DataFeed.next_batch) or is stuck")
            if record["status"] != "fed":  # terminated, or the node is gone: nobody wants more
                break
            tell(address, secret, fm.EpochEnd(pass_id))
        tell(address, secret, fm.End())
    except OSError as e:  # the node's process ended while being fed: its own result says how
        log.info("task %d: the node's feed closed while being fed (%s)", task, e)
    yield {"_tfos_summary": True, "task": task, "rows_per_epoch": fed}


def _join(kept: pa.RecordBatch, results: pa.RecordBatch) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([*kept.columns, *results.columns],
                                      names=[*kept.schema.names, *results.schema.names])


def task_output(kind: str, task: int, out: Any) -> Iterator:
    """What the barrier task returns for ``out``: an RDD's task returns Python objects (the
    summary dict, or one prediction per row); a DataFrame's, ``OUTPUT_SCHEMA`` batches (rows of
    ``OUTPUT_DDL``)."""
    if kind == "rdd":
        yield from (out if isinstance(out, list) else [out])
        return
    payload = json.dumps(out).encode() if isinstance(out, dict) else out
    yield pa.RecordBatch.from_arrays([values_array([task], pa.int32()), binary_array([payload])],
                                     schema=OUTPUT_SCHEMA)
