"""The barrier task of a node fed in-stage (see ``driver/feed/instage.py``): the node runs on a thread while
the task streams its partition to the node's own data feed over loopback, epoch after epoch (with
more epochs than one, the partition goes to a node-local Arrow spill as it is read, and the node's
feed reads each batch there, ``spillfile.py``), or sends its rows for inference and returns the
predictions as the task's output."""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ...wire import channel
from ...wire.errors import FeedError
from ...wire.feed.buffers import binary_array, values_array
from ...wire.feed.codec import batch_bytes, batches_of_rows
from ...wire.feed.pickled import dealt_batches
from ...wire.feed.predictions import result_values
from ...wire.feed.protocol import FRAME_BYTES, tell
from ...wire.feed.stage import FEED_KEY, OUTPUT_SCHEMA, InStage
from ...wire.feed.tasks import TASK_TIMEOUT_MARGIN, InferFeed, TrainFeed
from ...wire.plan import FOREGROUND_ROLES, NodePlan
from ..task import run_node
from .localfeed import LocalFeed
from .readahead import ReadAhead
from .spillfile import Spill

log = logging.getLogger(__name__)

NODE_ERROR_WAIT = 10.0  # seconds a task whose feed broke waits for its node's own error


def _batches(spec: InStage, items: Iterator) -> Iterator[pa.RecordBatch]:
    if spec.kind == "df":
        return (b.drop_columns([FEED_KEY]) if FEED_KEY in b.schema.names else b for b in items)
    if spec.rdd_schema is None:  # the RDD is empty
        return iter(())
    schema = pa.ipc.read_schema(pa.py_buffer(spec.rdd_schema))
    if spec.dealt is not None:  # PySpark's pickled batches, dealt out or gathered
        return dealt_batches(items, spec.dealt, schema, FRAME_BYTES)
    return batches_of_rows(items, schema, FRAME_BYTES)


def feed_node(spec: InStage, secret: channel.Secret, run_id: str, task: int, items: Iterator, local: LocalFeed,
              ahead_bytes: int = 64 << 20) -> Iterator:
    """Stream this task's partition to its own node: every epoch (training), or once with the
    predictions yielded as they come (inference). The partition is read from Spark (and spilled,
    for later epochs) up to ``ahead_bytes`` ahead of the node, starting while the node's process
    still starts. Returns at once when the node never served a feed (it failed or was stopped:
    the run's error says why)."""
    spill = Spill(run_id, task) if spec.mode == "train" and spec.epochs > 1 else None
    first = _batches(spec, items)
    ahead = ReadAhead(spill.tee(first) if spill is not None else first, ahead_bytes)
    try:
        address = local.wait()
        if address is None:
            return
        yield from _feed(spec, secret, task, address, iter(ahead), spill)
    finally:
        ahead.close()
        if spill is not None:
            spill.delete()


def _sample(spec: InStage, batches: Iterator[pa.RecordBatch]) -> tuple[bytes, Iterator[pa.RecordBatch]]:
    """The sample the node gets (``ctx.dataset``'s shapes), and the batches to feed: a DataFrame's
    is the first row of this node's own partition (the driver sent its schema alone, reading no
    row: a job fewer before the gang), or that schema when the partition is empty; an RDD's is the
    driver's."""
    if spec.kind != "df":
        return spec.sample, batches
    head = next(batches, None)
    if head is None:
        return spec.sample, iter(())
    return batch_bytes(head.slice(0, 1)).to_pybytes(), itertools.chain([head], batches)


def _feed(spec: InStage, secret: channel.Secret, task: int, address: tuple[str, int], first: Iterator[pa.RecordBatch],
          spill: Spill | None) -> Iterator:
    timeout = spec.timeout + TASK_TIMEOUT_MARGIN
    sample, first = _sample(spec, first)
    tell(address, secret, {"t": "sample", "pass": "in-stage", "data": sample})
    if spec.mode == "infer":
        infer = InferFeed(secret, [address], timeout, keep=list(spec.keep))
        for kept, results in infer.run(task, 0, first):
            out = results if kept is None or not kept.num_columns else _join(kept, results)
            yield result_values(out) if spec.kind == "rdd" else batch_bytes(out).to_pybytes()
        tell(address, secret, {"t": "end"})
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
            tell(address, secret, {"t": "epoch_end", "pass": pass_id})
        tell(address, secret, {"t": "end"})
    except OSError as e:  # the node's process ended while being fed: its own result says how
        log.info("task %d: the node's feed closed while being fed (%s)", task, e)
    yield {"_tfos_summary": True, "task": task, "rows_per_epoch": fed}


def _join(kept: pa.RecordBatch, results: pa.RecordBatch) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([*kept.columns, *results.columns],
                                      names=[*kept.schema.names, *results.schema.names])


def run_fed_node(plan: NodePlan, task: int, gpus: list[str], items: Iterator) -> Iterator:
    """A node whose barrier task also feeds it: the node runs on a thread while this task streams
    its partition; yields what the task returns (a summary, or the predictions)."""
    spec: InStage = plan.instage
    local = LocalFeed()
    outcome: dict[str, Any] = {}

    def node() -> None:
        try:
            outcome["summary"] = run_node(plan, task, gpus, local)
        except BaseException as e:  # re-raised in the task below
            outcome["error"] = e
        finally:
            local.ended()

    thread = threading.Thread(target=node, name=f"tfos-node-{task}", daemon=True)
    thread.start()
    try:
        if plan.roles[task][0] in FOREGROUND_ROLES:
            for out in feed_node(spec, plan.secret, plan.run_id, task, items, local,
                                 plan.feed_buffer_bytes or 64 << 20):
                yield from _task_output(spec.kind, task, out)
    except FeedError:
        # The feed broke, most often because the node's function failed: its own error, which
        # the node's thread has in moments, says why; failing the task first would lose it.
        thread.join(NODE_ERROR_WAIT)
        if "error" in outcome:
            raise outcome["error"] from None
        raise
    thread.join()
    if "error" in outcome:
        raise outcome["error"]


def _task_output(kind: str, task: int, out: Any) -> Iterator:
    """What the barrier task returns for ``out``: an RDD's task returns Python objects (the
    summary dict, or one prediction per row); a DataFrame's, ``OUTPUT_SCHEMA`` batches."""
    if kind == "rdd":
        yield from (out if isinstance(out, list) else [out])
        return
    payload = json.dumps(out).encode() if isinstance(out, dict) else out
    yield pa.RecordBatch.from_arrays([values_array([task], pa.int32()), binary_array([payload])],
                                     schema=OUTPUT_SCHEMA)
