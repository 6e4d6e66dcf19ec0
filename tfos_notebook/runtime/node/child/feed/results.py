"""The feeding connections of a node's data feed (``server.py``) and where its inference results
go: each row fed for inference came on the connection of the Spark task that wants its prediction
back, and results come in the order the rows were taken, so a queue of ``(source, rows still
owed)`` routes every result to its task."""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ....wire import channel
from ....wire.errors import FeedError
from ....wire.feed import messages as fm
from ....wire.feed.codec import batch_bytes
from ....wire.feed.protocol import send

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Partition:
    """What a node holds of one ``(pass, partition)`` fed for training, and which connection feeds it."""

    delivered: int = 0
    done: bool = False
    owner: Any = None


class Source:
    """One feeding connection."""

    def __init__(self, conn: channel.Connection, mode: str, part: Partition | None = None) -> None:
        self.conn, self.mode, self.part = conn, mode, part
        self.closed = False

    def send_results(self, batch: pa.RecordBatch) -> None:
        if self.closed:
            return
        try:
            send(self.conn, fm.Results(batch.num_rows, batch_bytes(batch)))
        except OSError as e:  # the inference task is gone; its partition is fed again elsewhere
            log.debug("results could not go back to their task: %s", e)
            self.closed = True


class ResultRoutes:
    """The sources that rows were taken from and still owe results, in the order they were taken."""

    def __init__(self) -> None:
        self._pending: deque[list] = deque()  # [source, rows still owed results], in consumption order
        self._lock = threading.Lock()

    def owe(self, pieces: list[Any]) -> None:
        """The rows of ``pieces`` (``queue.Piece``) that came for inference now await results."""
        owed = [p for p in pieces if p.chunk.source is not None]
        if owed:
            with self._lock:
                for p in owed:
                    if self._pending and self._pending[-1][0] is p.chunk.source:
                        self._pending[-1][1] += p.rows
                    else:
                        self._pending.append([p.chunk.source, p.rows])

    def send(self, batch: pa.RecordBatch) -> None:
        """Send predictions for the oldest rows that await them, in the order they were taken."""
        with self._lock:
            owed = sum(k for _, k in self._pending)
            if batch.num_rows > owed:
                raise FeedError(f"got {batch.num_rows} results but only {owed} fed rows await results: give "
                                "batch_results exactly one result per row of the batches read for inference")
            offset = 0
            while offset < batch.num_rows:
                entry = self._pending[0]
                k = min(entry[1], batch.num_rows - offset)
                entry[0].send_results(batch.slice(offset, k))
                offset += k
                entry[1] -= k
                if entry[1] == 0:
                    self._pending.popleft()
