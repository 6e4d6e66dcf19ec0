"""Reading a partition ahead of the node that consumes it: Spark's work on it (the shuffle fetch,
turning rows into Arrow, the spill to disk) goes on while the node's process still starts."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator

import pyarrow as pa


class ReadAhead:
    """Iterates ``source`` on a thread of its own, holding up to ``max_bytes`` of record batches
    (always at least one) until they are taken; errors reach the consumer in order.

    The source is the task's input from Spark, which its Python worker reads again once the task
    ends: :meth:`close` stops the thread and waits for it, and must be called before the task
    returns."""

    def __init__(self, source: Iterator[pa.RecordBatch], max_bytes: int) -> None:
        self._source, self._max = source, max_bytes
        self._held: deque[pa.RecordBatch] = deque()
        self._bytes = 0
        self._cond = threading.Condition()
        self._done = self._closed = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._read, daemon=True, name="tfos-read-ahead")
        self._thread.start()

    def _read(self) -> None:
        try:
            for batch in self._source:
                with self._cond:
                    while self._held and self._bytes >= self._max and not self._closed:
                        self._cond.wait()
                    if self._closed:
                        return
                    self._held.append(batch)
                    self._bytes += batch.nbytes
                    self._cond.notify_all()
        except BaseException as e:  # computing the data failed: the consumer raises it
            self._error = e
        finally:
            with self._cond:
                self._done = True
                self._cond.notify_all()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while True:
            with self._cond:
                while not self._held and not self._done:
                    self._cond.wait()
                if not self._held:
                    if self._error is not None:
                        raise self._error
                    return
                batch = self._held.popleft()
                self._bytes -= batch.nbytes
                self._cond.notify_all()
            yield batch

    def close(self) -> None:
        """Stop reading (the batch being read is finished first) and wait for the thread."""
        with self._cond:
            self._closed = True
            self._held.clear()
            self._cond.notify_all()
        self._thread.join()
