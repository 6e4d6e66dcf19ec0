"""The Spark tasks that feed the nodes: one per partition, run by ordinary (non-barrier) jobs.

Partition ``p`` goes to training node ``p % len(nodes)`` over the network, wherever the task runs:
no task has to land on its node's executor. A DataFrame's partitions arrive as Arrow record
batches (``mapInArrow``) and leave as they are; an RDD's rows become record batches here, with the
schema the driver derived from the first row, so every partition agrees on the types.

Failures that another attempt cannot cure (the node terminated, finished, is gone, or stopped
taking data) come back as a status in the task's record rather than as an exception, so Spark
does not retry them; an error while computing the data itself propagates, and Spark retries the
task, which resumes where the node's count says the last attempt stopped.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa

from .. import channel
from ..errors import ChannelError, FeedError, FeedTimeout
from ..message import Message
from . import messages as fm
from .buffers import concat_batches, select_columns
from .codec import batches_of_rows, slices
from .nodequery import ask_driver
from .predictions import join, result_values
from .protocol import CONNECTION_ERRORS, FRAME_BYTES, MAX_FRAME, FeedClient, SpillEntry

RECORD_SCHEMA = pa.schema([("part", pa.int32()), ("node", pa.int32()), ("rows", pa.int64()),
                           ("skipped", pa.int64()), ("status", pa.string()), ("detail", pa.string())])
RECORD_DDL = "part int, node int, rows long, skipped long, status string, detail string"
TASK_TIMEOUT_MARGIN = 60.0  # the tasks' own timeout, a safety net behind the driver's watch
M = TypeVar("M", bound=Message)


class _Stop(Exception):
    def __init__(self, status: str, detail: str = "") -> None:
        super().__init__(status)
        self.status, self.detail = status, detail


def _task_info(part: int | None = None) -> tuple[int, int]:
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        return part or 0, 0
    return (tc.partitionId() if part is None else part), tc.attemptNumber()


def _read_schema(data: bytes) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(data))


def _check_frame(piece: pa.RecordBatch) -> None:
    if piece.num_rows == 1 and piece.nbytes > MAX_FRAME - (1 << 20):
        raise FeedError(f"a row of {piece.nbytes} bytes is larger than the {MAX_FRAME >> 20} MiB a feed frame "
                        "carries: store such data in files and feed their paths")


@dataclass
class TrainFeed:
    """Feeds one pass (epoch) of training data: ``pass_id`` names it on the nodes.

    Args:
        secret: the run's secret. nodes: data-feed addresses of the training nodes, in order.
        timeout: seconds a send may block on a node that takes no data before the task gives up.
        rdd_schema: Arrow schema (IPC bytes) for the rows of an RDD; None for a DataFrame.
    """

    secret: channel.Secret
    nodes: list[tuple[str, int]]
    pass_id: str
    timeout: float
    rdd_schema: bytes | None = None
    frame_bytes: int = FRAME_BYTES

    def arrow_partition(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """For ``DataFrame.mapInArrow``: yields one record of what happened."""
        part, attempt = _task_info()
        yield pa.RecordBatch.from_pylist([self.feed(part, attempt, batches)], schema=RECORD_SCHEMA)

    def rdd_partition(self, part: int, rows: Iterator) -> Iterator[dict]:
        """For ``RDD.mapPartitionsWithIndex``."""
        _, attempt = _task_info(part)
        schema = _read_schema(self.rdd_schema)
        yield self.feed(part, attempt, batches_of_rows(rows, schema, self.frame_bytes))

    def feed(self, part: int, attempt: int, batches: Iterator[pa.RecordBatch | SpillEntry]) -> dict:
        """Feed one partition's ``batches`` (record batches, or where the node reads them in a spill
        on its host) to its node; the record of what happened."""
        node = part % len(self.nodes)
        record = {"part": part, "node": node, "rows": 0, "skipped": 0, "status": "fed", "detail": ""}
        client = None
        try:
            client = _call(lambda: FeedClient(self.nodes[node], self.secret, self.timeout))
            reply = _call(lambda: client.request(fm.Open(self.pass_id, part, attempt, "train")))
            if isinstance(reply, fm.Stopped):
                raise _Stop("terminated")
            skip = _expect(reply, fm.Ready).skip
            if skip < 0:
                raise _Stop("already", "an earlier attempt fed this partition")
            total = 0
            for batch in batches:  # an error computing the data propagates: Spark retries the task
                if skip >= batch.num_rows:
                    skip -= batch.num_rows
                    total += batch.num_rows
                    record["skipped"] += batch.num_rows
                    continue
                if skip and isinstance(batch, SpillEntry):  # in-stage nodes start afresh: never part of one
                    raise FeedError("a batch in a spill is fed whole, and the node holds part of it")
                if skip:
                    batch = batch.slice(skip)
                    total += skip
                    record["skipped"] += skip
                    skip = 0
                for piece in [batch] if isinstance(batch, SpillEntry) else slices(batch, self.frame_bytes):
                    _send(client, piece)
                    total += piece.num_rows
                    record["rows"] += piece.num_rows
            reply = _call(lambda: client.request(fm.Done(total)))
            if _expect(reply, fm.Ack).terminated:
                record["status"] = "terminated"
            return record
        except _Stop as stop:
            return {**record, "status": stop.status, "detail": stop.detail}
        finally:
            if client is not None:
                client.close()


def _expect(reply: Message, kind: type[M]) -> M:
    """``reply``, which must be a ``kind``."""
    if not isinstance(reply, kind):
        raise FeedError(f"the node answered {reply.TYPE!r} where {kind.TYPE!r} was expected")
    return reply


def _send(client: FeedClient, piece: pa.RecordBatch | SpillEntry) -> None:
    """Send one frame of rows, or where the node reads them in a spill on its host."""
    if isinstance(piece, SpillEntry):
        if not _call(lambda: client.send_rows_file(piece)):
            raise _Stop("terminated")
        return
    _check_frame(piece)
    if _call(client.poll_notice):
        raise _Stop("terminated")
    _call(lambda: client.send_rows(piece))


def _call(fn):
    """Run a feed call; turn what another attempt could not cure into ``_Stop``."""
    try:
        return fn()
    except TimeoutError as e:
        raise _Stop("timeout", f"the node took no data for {e}") from e
    except ChannelError as e:
        raise FeedError(str(e)) from e
    except CONNECTION_ERRORS as e:
        raise _Stop("unreachable", f"{type(e).__name__}: {e}") from e


@dataclass
class InferFeed:
    """Sends rows to a node for inference and yields its predictions, aligned row for row.

    Args:
        secret, nodes, timeout: as for :class:`TrainFeed`.
        rdd_schema: Arrow schema of an RDD's rows (None for a DataFrame).
        keep: columns of a DataFrame to keep next to the predictions.
        out_schema: Arrow schema (IPC bytes) of the output DataFrame (kept columns, then predictions).
        driver, tasks: the run's control server and the barrier task of each node in ``nodes``:
            a node whose feed is gone is asked after there, so that its own failure is reported.
    """

    secret: channel.Secret
    nodes: list[tuple[str, int]]
    timeout: float
    rdd_schema: bytes | None = None
    keep: list[str] | None = None
    out_schema: bytes | None = None
    frame_bytes: int = FRAME_BYTES
    driver: tuple[str, int] | None = None
    tasks: tuple[int, ...] = ()

    def arrow_partition(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """For ``DataFrame.mapInArrow``: kept columns plus prediction columns."""
        part, attempt = _task_info()
        out = _read_schema(self.out_schema)
        for kept, results in self.run(part, attempt, batches):
            yield join(kept if self.keep else None, results, out)

    def rdd_partition(self, part: int, rows: Iterator) -> Iterator:
        """For ``RDD.mapPartitionsWithIndex``: one prediction per row."""
        _, attempt = _task_info(part)
        schema = _read_schema(self.rdd_schema)
        for _, results in self.run(part, attempt, batches_of_rows(rows, schema, self.frame_bytes)):
            yield from result_values(results)

    def node_failure(self, node: int) -> str:
        """Why the ``node``-th node failed, as the driver tells ("" when it did not or cannot tell)."""
        return ask_driver(self.driver, self.secret, self.tasks[node]) if self.tasks else ""

    def run(self, part: int, attempt: int,
            batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[pa.RecordBatch | None, pa.RecordBatch]]:
        """Yields ``(kept rows, their predictions)`` as predictions arrive."""
        node = part % len(self.nodes)
        where = f"node {node} at {self.nodes[node][0]}:{self.nodes[node][1]}"
        try:
            client = FeedClient(self.nodes[node], self.secret, self.timeout)
            client.request(fm.Open("infer", part, attempt, "infer"))
        except CONNECTION_ERRORS as e:
            failure = self.node_failure(node)
            if failure:
                raise FeedError(f"{failure} (its data feed at {where} is gone, so its share of the rows cannot be "
                                "answered)") from e
            raise FeedError(f"cannot reach the data feed of {where} ({e}): the cluster's nodes must be running "
                            "(run inference before shutdown)") from e
        answers: queue.Queue = queue.Queue()
        reader = threading.Thread(target=_read_results, args=(client, answers), daemon=True, name="tfos-infer-answers")
        reader.start()
        pending: deque[pa.RecordBatch] = deque()  # kept columns of rows awaiting predictions
        sent = answered = 0
        try:
            for batch in batches:
                for piece in slices(batch, self.frame_bytes):
                    _check_frame(piece)
                    try:
                        client.send_rows(piece)
                    except CONNECTION_ERRORS as e:
                        raise _lost(where, sent - answered, e, self.node_failure(node)) from e
                    sent += piece.num_rows
                    pending.append(select_columns(piece, self.keep or []))
                while not answers.empty():
                    results = _answer(answers.get(), where, sent - answered)
                    answered += results.num_rows
                    yield _take(pending, results.num_rows), results
            try:
                client.send(fm.Done(sent))
            except CONNECTION_ERRORS as e:
                raise _lost(where, sent - answered, e, self.node_failure(node)) from e
            while answered < sent:
                try:
                    msg = answers.get(timeout=self.timeout)
                except queue.Empty:
                    raise FeedTimeout(f"{where} answered {answered} of {sent} rows and then nothing for "
                                      f"{self.timeout:.0f}s: check that its function calls ctx.predict or "
                                      "DataFeed.batch_results for every batch, or raise feed_timeout") from None
                results = _answer(msg, where, sent - answered)
                answered += results.num_rows
                yield _take(pending, results.num_rows), results
        finally:
            client.close()
            reader.join(5)  # it ends with the connection


def _read_results(client: FeedClient, answers: queue.Queue) -> None:
    try:
        while True:
            answers.put(client.recv())
    except (*CONNECTION_ERRORS, ValueError) as e:
        answers.put(e)


def _lost(where: str, waiting: int, e: BaseException, failure: str = "") -> FeedError:
    if failure:
        return FeedError(f"{failure} ({where} closed its data feed with {waiting} rows unanswered)")
    return FeedError(f"{where} closed the feed with {waiting} rows unanswered ({type(e).__name__}: {e}): its "
                     "function failed or returned; the run's error says why")


def _answer(msg: Message | BaseException, where: str, waiting: int) -> pa.RecordBatch:
    if isinstance(msg, BaseException):
        raise _lost(where, waiting, msg)
    if isinstance(msg, fm.Error):
        raise FeedError(f"{where} refused the feed: {msg.message}")
    if not isinstance(msg, fm.Results):
        raise FeedError(f"{where} sent {msg.TYPE!r} where predictions were expected")
    reader = pa.ipc.open_stream(pa.py_buffer(msg.data))
    return reader.read_next_batch()


def _take(pending: deque, n: int) -> pa.RecordBatch:
    parts = []
    while n:
        head = pending[0]
        k = min(n, head.num_rows)
        parts.append(head.slice(0, k))
        if k == head.num_rows:
            pending.popleft()
        else:
            pending[0] = head.slice(k)
        n -= k
    return parts[0] if len(parts) == 1 else concat_batches(parts)
