"""The node's bounded buffer: back-pressure, markers, terminate (no Spark needed)."""

from __future__ import annotations

import threading
import time

import pyarrow as pa

from tfos_notebook.runtime.node.child.feed.queue import Chunk, EpochEnd, FeedEnd, FeedQueue, PartitionEnd


def chunk(start: int, n: int, source=None) -> Chunk:
    batch = pa.record_batch([pa.array(range(start, start + n))], names=["id"])
    return Chunk(batch, nbytes=n * 8, source=source)


def ids(pieces) -> list[int]:
    return [i for p in pieces for i in p.chunk.array("id")[p.start:p.stop].tolist()]


def test_a_full_buffer_holds_producers_until_the_consumer_takes():
    q = FeedQueue(max_bytes=100 * 8)
    assert q.put(chunk(0, 100))
    done = threading.Event()
    threading.Thread(target=lambda: (q.put(chunk(100, 100)), done.set()), daemon=True).start()
    assert not done.wait(0.5), "the second chunk should wait for room"
    pieces, why = q.take(100, epoch=True, partition=False)
    assert why == "full" and ids(pieces) == list(range(100))
    assert done.wait(5)
    assert ids(q.take(100, epoch=True, partition=False)[0]) == list(range(100, 200))


def test_a_chunk_larger_than_the_buffer_still_passes_alone():
    q = FeedQueue(max_bytes=10)
    assert q.put(chunk(0, 100))
    assert q.buffered_bytes == 800


def test_takes_cross_chunks_and_stop_at_the_epoch_marker():
    q = FeedQueue(1 << 20)
    q.put(chunk(0, 5))
    q.put(chunk(5, 5))
    q.mark(EpochEnd("1.0"))
    q.put(chunk(10, 3))
    pieces, why = q.take(7, epoch=True, partition=False)
    assert why == "full" and ids(pieces) == list(range(7))
    pieces, why = q.take(7, epoch=True, partition=False)
    assert why == "epoch" and ids(pieces) == [7, 8, 9]
    pieces, why = q.take(7, epoch=True, partition=False, timeout=0.2)
    assert why == "timeout" and ids(pieces) == [10, 11, 12]


def test_epoch_markers_are_transparent_when_not_asked_for_and_the_end_is_sticky():
    q = FeedQueue(1 << 20)
    q.put(chunk(0, 2))
    q.mark(EpochEnd("1.0"))
    q.put(chunk(2, 2))
    q.mark(FeedEnd())
    pieces, why = q.take(10, epoch=False, partition=False)
    assert why == "end" and ids(pieces) == [0, 1, 2, 3]
    assert q.take(10, epoch=False, partition=False) == ([], "end")


def test_an_inference_partition_end_flushes_a_partial_batch():
    q = FeedQueue(1 << 20)
    q.put(chunk(0, 3, source="a"))
    q.mark(PartitionEnd("a"))
    pieces, why = q.take(10, epoch=False, partition=True)
    assert why == "partition" and ids(pieces) == [0, 1, 2]


def test_terminate_drops_the_buffer_and_frees_waiting_producers():
    q = FeedQueue(max_bytes=8)
    q.put(chunk(0, 10))
    results = []
    t = threading.Thread(target=lambda: results.append(q.put(chunk(10, 10))), daemon=True)
    t.start()
    time.sleep(0.2)
    assert q.terminate() == 10
    t.join(5)
    assert results == [False]
    assert q.take(5, epoch=True, partition=False) == ([], "terminated")


def test_stall_time_counts_only_while_data_waits():
    q = FeedQueue(1 << 20)
    assert q.stalled_for() == 0.0
    q.put(chunk(0, 1))
    time.sleep(0.2)
    assert q.stalled_for() >= 0.2
    q.take(1, epoch=False, partition=False)
    assert q.stalled_for() == 0.0
