"""The data feed a training node serves when the run's input mode is ``spark``.

The node pickles an unstarted :class:`FeedServer` into its child's payload; the child starts it
before calling the user's function (``ctx.mgr`` is this object, as TensorFlowOnSpark's manager
was). It listens on the node's address with the run's secret (see ``wire/feed/protocol.py``),
reports its address and progress to the driver through the child's status pipe, and fills a
bounded :class:`FeedQueue` that ``ctx.dataset``, ``DataFeed`` and ``ctx.predict`` read.

Exactly once per pass: the node counts the rows it holds of each ``(pass, partition)``; a retried
Spark task is told how many to skip, a duplicate of a finished one that all are there, and two
attempts never feed the same partition at once.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

import pyarrow as pa

from ....wire import channel
from ....wire.errors import DataError, FeedError
from ....wire.feed import messages as fm
from ....wire.feed.codec import read_stream
from ....wire.feed.protocol import MAX_FRAME, send
from ....wire.feed.spill import SpillReader
from ....wire.messages import FeedReport, FeedServing
from .queue import Chunk, EpochEnd, FeedEnd, FeedFailed, FeedQueue, PartitionEnd, Piece
from .results import Partition, ResultRoutes, Source

if TYPE_CHECKING:
    from ..statuspipe import StatusPipe

log = logging.getLogger(__name__)

REPORT_SECONDS = 1.0


def _stream(msg: fm.Sample | fm.Rows) -> tuple[pa.Schema, pa.RecordBatch | None]:
    """The Arrow IPC stream in ``msg.data``; ``ChannelError`` when it is not one (Arrow raises a
    plain ``OSError`` for a truncated stream, which the server would take for a closed socket and
    drop the connection)."""
    try:
        return read_stream(msg.data)
    except (pa.ArrowException, OSError, FeedError) as e:
        raise channel.ChannelError(f"malformed {msg.TYPE!r} message: {e}") from None


class FeedServer:
    """A node's data feed: server, buffer, and the bookkeeping that makes delivery exactly-once.

    Args:
        secret: the run's secret; every connection must prove it.
        host: the address to listen on (the one this node uses to reach the driver).
        buffer_bytes: how many bytes of fed data may wait for the consumer.
    """

    def __init__(self, secret: channel.Secret, host: str, buffer_bytes: int) -> None:
        self.secret, self.host, self.buffer_bytes = secret, host, buffer_bytes
        self.queue: FeedQueue | None = None
        self.pace = None  # the node's pace.Pace, set in its process
        self.ended = False
        self._server: channel.ControlServer | None = None

    def __getstate__(self) -> dict:
        if self._server is not None:
            raise TypeError("a started FeedServer cannot be pickled")
        return dict(self.__dict__)

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self, status: StatusPipe | None = None) -> FeedServer:
        """Listen, and report the address (and then progress) on ``status``, the child's status pipe."""
        self.queue = FeedQueue(self.buffer_bytes)
        self._status = status
        self._cond = threading.Condition()
        self._parts: dict[tuple[str, int], Partition] = {}
        self._train_conns: set[channel.Connection] = set()
        self._results = ResultRoutes()
        self._sample: tuple[pa.Schema, pa.RecordBatch | None] | None = None
        self._failure: str | None = None
        self._server = channel.ControlServer(self.host, self.secret, self._on_message, self._on_close,
                                             max_frame=MAX_FRAME)
        self._emit(FeedServing(self._server.host, self._server.port))
        self._closed = threading.Event()
        self._reporter = threading.Thread(target=self._report_loop, daemon=True, name="tfos-feed-report")
        self._reporter.start()
        return self

    def close(self) -> None:
        """Stop serving: close every connection and stop the progress reports (a started server
        that is never closed ends with its process)."""
        if self._server is None:
            return
        self._closed.set()
        self._server.close()
        self._reporter.join()

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None, "the feed server was not started"
        return self._server.address

    def _emit(self, msg: FeedServing | FeedReport) -> None:
        if self._status is not None:
            self._status.send(msg)

    def _progress(self) -> FeedReport:
        q = self.queue
        return FeedReport(received=q.rows_in, consumed=q.rows_out, buffered=q.buffered_bytes,
                          stalled=round(q.stalled_for(), 2), terminated=q.terminated)

    def _report_loop(self) -> None:
        last: tuple = ()
        while not self._closed.wait(REPORT_SECONDS):
            msg = self._progress()
            key = (msg.received, msg.consumed, msg.terminated)
            if key != last or msg.buffered:
                last = key
                try:
                    self._emit(msg)
                except OSError as e:  # the status pipe closed: the node is gone
                    log.debug("feed progress reports stop: %s", e)
                    return

    # -- connections -------------------------------------------------------------------------------
    def _on_message(self, conn: channel.Connection, raw: dict) -> None:
        try:
            msg = fm.decode(raw)
            match msg:
                case fm.Rows():
                    self._on_rows(conn, msg)
                case fm.RowsFile():
                    self._on_rows_file(conn, msg)
                case fm.Open():
                    self._on_open(conn, msg)
                case fm.Done():
                    self._on_done(conn, msg)
                case fm.Sample():
                    sample = _stream(msg)
                    with self._cond:
                        self._sample = sample
                        self._cond.notify_all()
                    send(conn, fm.Ok())
                case fm.EpochEnd():
                    self.queue.mark(EpochEnd(msg.pass_id))
                    send(conn, fm.Ok())
                case fm.End() | fm.Fail():  # no more data will come; Fail: the task cannot read its rows
                    failure = msg.message if isinstance(msg, fm.Fail) else None
                    self.queue.mark(FeedEnd() if failure is None else FeedFailed(failure))
                    with self._cond:
                        self.ended, self._failure = True, failure
                        self._cond.notify_all()
                    send(conn, fm.Ok())
                case _:
                    raise channel.ChannelError(f"a node's feed does not take {msg.TYPE!r} messages")
        except channel.ChannelError as e:  # counted by the server; the connection goes on
            if raw.get("type") != fm.Rows.TYPE:  # the one request that is never answered
                send(conn, fm.Error(str(e)))
            raise

    def _on_open(self, conn: channel.Connection, msg: fm.Open) -> None:
        if "feed" in conn.attrs:  # its partition would stay owned by it (a retry of it would wait forever)
            raise channel.ChannelError("a connection feeds one partition: this one already opened one")
        if msg.mode == "infer":
            conn.attrs["feed"] = Source(conn, "infer")
            send(conn, fm.Ready(0))
            return
        if self.queue.terminated:
            send(conn, fm.Stopped())
            return
        key = (msg.pass_id, msg.part)
        with self._cond:
            part = self._parts.setdefault(key, Partition())
            while part.owner is not None and not self.queue.terminated:
                self._cond.wait(1.0)  # another attempt is still feeding this partition
            if self.queue.terminated:
                send(conn, fm.Stopped())
                return
            part.owner = conn
            self._train_conns.add(conn)
        conn.attrs["feed"] = Source(conn, "train", part)
        send(conn, fm.Ready(-1 if part.done else part.delivered))

    def _on_rows(self, conn: channel.Connection, msg: fm.Rows) -> None:
        source: Source | None = conn.attrs.get("feed")
        if source is None:
            raise channel.ChannelError("rows before open")
        _, batch = _stream(msg)
        if batch is None or batch.num_rows == 0:
            return
        infer = source.mode == "infer"
        if self.queue.put(Chunk(batch, len(msg.data), source if infer else None)) and not infer:
            source.part.delivered += batch.num_rows

    def _on_rows_file(self, conn: channel.Connection, msg: fm.RowsFile) -> None:
        source: Source | None = conn.attrs.get("feed")
        if source is None or source.mode != "train":
            raise channel.ChannelError("rows_file before open, or while feeding inference")
        reader: SpillReader | None = conn.attrs.get("spill")
        if reader is None or reader.path != msg.path:
            if reader is not None:
                reader.close()
            reader = conn.attrs["spill"] = SpillReader(msg.path)
        batch = reader.batch(msg.offset, msg.length)
        if self.queue.put(Chunk(batch, msg.length)):
            source.part.delivered += batch.num_rows
            send(conn, fm.Ok())
        else:
            send(conn, fm.Stopped())

    def _on_done(self, conn: channel.Connection, msg: fm.Done) -> None:
        source: Source | None = conn.attrs.get("feed")
        if source is None:
            raise channel.ChannelError("done before open")
        if source.mode == "infer":
            self.queue.mark(PartitionEnd(source))
            return
        part, terminated = source.part, self.queue.terminated
        with self._cond:
            if not terminated and part.delivered != msg.rows:
                send(conn, fm.Error(f"the node holds {part.delivered} rows of this partition but the task fed "
                                    f"{msg.rows}: the partition's rows changed between attempts; make the data "
                                    "deterministic (sort or cache it)"))
                return
            part.done = part.done or not terminated
            part.owner = None
            self._train_conns.discard(conn)
            self._cond.notify_all()
        del conn.attrs["feed"]  # the partition is no longer this connection's to feed
        send(conn, fm.Ack(terminated))

    def _on_close(self, conn: channel.Connection) -> None:
        if (reader := conn.attrs.pop("spill", None)) is not None:
            reader.close()
        source: Source | None = conn.attrs.get("feed")
        if source is None:
            return
        source.closed = True
        if source.part is not None:
            with self._cond:
                if source.part.owner is conn:
                    source.part.owner = None
                self._train_conns.discard(conn)
                self._cond.notify_all()

    # -- consumer side -----------------------------------------------------------------------------
    def sample(self, timeout: float | None = None) -> tuple[pa.Schema, pa.RecordBatch | None]:
        """Schema and first row of the data being fed; waits for the driver's first ``train``."""
        with self._cond:
            self._cond.wait_for(lambda: self._sample is not None or self.ended or self.queue.terminated, timeout)
            if self._sample is None and self._failure is not None:
                raise DataError(self._failure)
            if self._sample is None:
                raise FeedError("no data was fed to this node before the feed ended: call train() on the driver "
                                "before the feed is closed")
            return self._sample

    def take(self, n: int, *, epoch: bool = False, partition: bool = False,
             timeout: float | None = None) -> tuple[list[Piece], str]:
        """Up to ``n`` rows (see :meth:`FeedQueue.take`); inference rows are remembered so that
        :meth:`send_results` can route each result to the task that sent its row."""
        if self.pace is not None:  # how long the function waits for its data (the input-bound finding)
            self.pace.taking()
        pieces, why = self.queue.take(n, epoch=epoch, partition=partition, timeout=timeout)
        if self.pace is not None:
            self.pace.fed(sum(p.rows for p in pieces))
        self._results.owe(pieces)
        return pieces, why

    def send_results(self, batch: pa.RecordBatch) -> None:
        """Send predictions for the oldest rows that await them, in the order they were taken."""
        self._results.send(batch)

    def terminate(self) -> None:
        """Stop feeding: drop buffered data, refuse more, and tell the feeding tasks to stop."""
        self.queue.terminate()
        with self._cond:
            conns = list(self._train_conns)
            self._cond.notify_all()
        for conn in conns:
            try:
                send(conn, fm.Terminated())
            except OSError as e:  # that task is gone already
                log.debug("could not tell a feeding task to stop: %s", e)
        self._emit(self._progress())
