"""Reading a node's partition ahead of the node (no Spark: the source is a plain iterator)."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from tfos_notebook.runtime.node.task.feed.readahead import ReadAhead


def batches(n: int, rows: int = 100, read: list | None = None, fail_at: int | None = None):
    for i in range(n):
        if i == fail_at:
            raise ValueError(f"computing batch {i} failed")
        if read is not None:
            read.append(i)
        yield pa.RecordBatch.from_pydict({"i": list(range(i * rows, (i + 1) * rows))})


def wait_for(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_reads_ahead_until_its_bytes_are_held_then_waits_for_the_consumer():
    read: list[int] = []
    one = next(batches(1)).nbytes
    ahead = ReadAhead(batches(10, read=read), max_bytes=3 * one)
    wait_for(lambda: len(read) == 4)  # three held, the fourth read and waiting for room
    time.sleep(0.1)
    assert len(read) == 4
    got = [b.column(0)[0].as_py() for b in ahead]
    assert got == [i * 100 for i in range(10)] and len(read) == 10
    ahead.close()


def test_an_error_computing_the_data_reaches_the_consumer_after_the_batches_before_it():
    ahead = ReadAhead(batches(5, fail_at=3), max_bytes=1 << 20)
    got = []
    with pytest.raises(ValueError, match="computing batch 3 failed"):
        for b in ahead:
            got.append(b.num_rows)
    assert got == [100, 100, 100]
    ahead.close()


def test_close_stops_a_reader_waiting_for_room_and_waits_for_it():
    read: list[int] = []
    ahead = ReadAhead(batches(100, read=read), max_bytes=1)
    wait_for(lambda: len(read) == 2)
    ahead.close()
    assert not [t for t in threading.enumerate() if t.name == "tfos-read-ahead"]
    assert len(read) == 2
