"""The node's buffer of fed data: record batches and markers, bounded in bytes.

Readers of feeding connections ``put`` record batches; when the buffer holds ``max_bytes`` they
block, stop reading their socket, and TCP carries the back-pressure to the Spark task that feeds.
The consumer (``ctx.dataset``, ``DataFeed``, ``ctx.predict``) ``take``s rows in any batch size;
markers tell it where an epoch, a partition (for inference) and the whole feed end. Markers never
wait for room, so they cannot deadlock behind data.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ....host.timeouts import Deadline
from ....wire.errors import DataError
from ....wire.feed.codec import column_to_numpy


@dataclass(eq=False)
class Chunk:
    """One received record batch; ``source`` is set for inference rows (whom to answer)."""

    batch: pa.RecordBatch
    nbytes: int
    source: Any = None
    _arrays: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def rows(self) -> int:
        return self.batch.num_rows

    def array(self, name: str) -> np.ndarray:
        """Column ``name`` as numpy, converted once per chunk and then sliced as views."""
        if name not in self._arrays:
            idx = self.batch.schema.get_field_index(name)
            if idx < 0:
                from ....wire.errors import FeedError

                raise FeedError(f"the fed data has no column {name!r}; it has {self.batch.schema.names}")
            self._arrays[name] = column_to_numpy(self.batch.column(idx), name)
        return self._arrays[name]


@dataclass(frozen=True)
class EpochEnd:
    pass_id: str


@dataclass(frozen=True)
class PartitionEnd:
    source: Any


class FeedEnd:
    """No more data will come."""


@dataclass(frozen=True)
class FeedFailed:
    """The task feeding this node could not read its rows: every take that reaches it raises
    ``DataError(message)``."""

    message: str


@dataclass(frozen=True)
class Piece:
    """Rows ``start:stop`` of a chunk, as handed to the consumer."""

    chunk: Chunk
    start: int
    stop: int

    @property
    def rows(self) -> int:
        return self.stop - self.start


class FeedQueue:
    """A FIFO of chunks and markers holding at most ``max_bytes`` of chunks (but always at least one)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: deque = deque()
        self._bytes = 0
        self._offset = 0  # rows of the head chunk already taken
        self._cond = threading.Condition()
        self.terminated = False
        self.rows_in = 0
        self.rows_out = 0
        self._since = time.monotonic()  # last time the consumer took rows, or data arrived to an idle buffer

    # -- producers --------------------------------------------------------------------------------
    def put(self, chunk: Chunk) -> bool:
        """Append a chunk, waiting for room. False when feeding was terminated (the chunk is dropped)."""
        with self._cond:
            while not self.terminated and self._bytes and self._bytes + chunk.nbytes > self.max_bytes:
                self._cond.wait()
            if self.terminated:
                return False
            if not self._bytes:
                self._since = time.monotonic()
            self._items.append(chunk)
            self._bytes += chunk.nbytes
            self.rows_in += chunk.rows
            self._cond.notify_all()
            return True

    def mark(self, marker: Any) -> None:
        """Append a marker (EpochEnd, PartitionEnd, FeedEnd, FeedFailed) without waiting for room."""
        with self._cond:
            self._items.append(marker)
            self._cond.notify_all()

    def terminate(self) -> int:
        """Drop every buffered chunk and refuse later ones; returns the rows dropped."""
        with self._cond:
            self.terminated = True
            dropped = sum(it.rows for it in self._items if isinstance(it, Chunk)) - self._offset
            self._items.clear()
            self._bytes = self._offset = 0
            self._cond.notify_all()
            return dropped

    # -- consumer ---------------------------------------------------------------------------------
    def take(self, n: int, *, epoch: bool, partition: bool, timeout: float | None = None) -> tuple[list[Piece], str]:
        """Up to ``n`` rows. Blocks until it has ``n``, or reaches a marker that ends this take, and
        says why it returned: ``full``, ``epoch`` (an epoch ended and ``epoch`` is true),
        ``partition`` (an inference partition ended, ``partition`` is true and rows were taken),
        ``end`` (the feed ended; this marker stays so every later take sees it), ``terminated``, or
        ``timeout``; raises ``DataError`` on reaching a ``FeedFailed`` (which stays too)."""
        pieces: list[Piece] = []
        got = 0
        deadline = Deadline(timeout)
        with self._cond:
            while got < n:
                if self.terminated:
                    return pieces, "terminated"
                if not self._items:
                    if deadline.expired:
                        return pieces, "timeout"
                    self._cond.wait(deadline.remaining())
                    continue
                head = self._items[0]
                if isinstance(head, Chunk):
                    k = min(n - got, head.rows - self._offset)
                    pieces.append(Piece(head, self._offset, self._offset + k))
                    self._offset += k
                    got += k
                    self.rows_out += k
                    self._since = time.monotonic()
                    if self._offset == head.rows:
                        self._items.popleft()
                        self._bytes -= head.nbytes
                        self._offset = 0
                        self._cond.notify_all()
                elif isinstance(head, EpochEnd):
                    if epoch:
                        self._items.popleft()
                        return pieces, "epoch"
                    self._items.popleft()
                elif isinstance(head, PartitionEnd):
                    self._items.popleft()
                    if partition and got:
                        return pieces, "partition"
                elif isinstance(head, FeedFailed):
                    raise DataError(head.message)
                else:  # FeedEnd stays at the head
                    return pieces, "end"
            return pieces, "full"

    # -- views -------------------------------------------------------------------------------------
    @property
    def buffered_bytes(self) -> int:
        return self._bytes

    def stalled_for(self) -> float:
        """Seconds the buffered data has waited without the consumer taking any (0 when empty)."""
        with self._cond:
            if not self._bytes:
                return 0.0
            return time.monotonic() - self._since
