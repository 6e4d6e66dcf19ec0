"""A node's data feed served in this process and fed by the Spark tasks' code, called directly:
exactly-once bookkeeping, authentication, back-pressure, terminate, inference routing."""

from __future__ import annotations

import threading
import time

import numpy as np
import pyarrow as pa
import pytest

from tfos_notebook.runtime.driver.errors import ChannelError
from tfos_notebook.runtime.node.child.feed.datafeed import DataFeed, arrays_of, predict
from tfos_notebook.runtime.node.child.feed.server import FeedServer
from tfos_notebook.runtime.wire import channel
from tfos_notebook.runtime.wire.feed import messages as fm
from tfos_notebook.runtime.wire.feed.codec import empty_stream
from tfos_notebook.runtime.wire.feed.protocol import FeedClient, tell
from tfos_notebook.runtime.wire.feed.tasks import InferFeed, TrainFeed

SECRET = channel.new_secret()


@pytest.fixture
def server():
    srv = FeedServer(SECRET, "127.0.0.1", buffer_bytes=64 << 20).start()
    yield srv
    srv.close()


def batches(start: int, stop: int, size: int = 100, width: int = 1):
    for lo in range(start, stop, size):
        ids = np.arange(lo, min(stop, lo + size))
        yield pa.record_batch([pa.array(ids), pa.array(list(np.ones((len(ids), width), np.float32)))],
                              names=["id", "x"])


def drain(srv: FeedServer, n: int = 64) -> list[int]:
    out = []
    while True:
        pieces, why = srv.take(n, epoch=True, timeout=2)
        out += arrays_of(pieces, ["id"])["id"].tolist() if pieces else []
        if why != "full":
            return out


def test_a_retried_partition_resumes_where_the_node_count_stopped(server):
    feed = TrainFeed(SECRET, [server.address], "1.0", timeout=30)

    def failing():
        yield from batches(0, 300)
        raise RuntimeError("executor lost while computing the partition")

    with pytest.raises(RuntimeError, match="executor lost"):
        feed.feed(part=0, attempt=0, batches=failing())
    record = feed.feed(part=0, attempt=1, batches=batches(0, 1000))
    assert record["status"] == "fed" and record["skipped"] == 300 and record["rows"] == 700
    tell(server.address, SECRET, fm.EpochEnd("1.0"))
    assert drain(server) == list(range(1000))


def test_a_partition_already_fed_is_not_fed_again(server):
    feed = TrainFeed(SECRET, [server.address], "1.0", timeout=30)
    assert feed.feed(3, 0, batches(0, 50))["rows"] == 50
    again = feed.feed(3, 1, batches(0, 50))
    assert again["status"] == "already" and again["rows"] == 0
    other_epoch = TrainFeed(SECRET, [server.address], "1.1", timeout=30).feed(3, 0, batches(0, 50))
    assert other_epoch["rows"] == 50


def test_a_connection_without_the_run_secret_is_refused(server):
    with pytest.raises((ChannelError, ConnectionError)):
        FeedClient(server.address, channel.new_secret(), timeout=5)
    assert server._server.rejected == 1


def feeding_a_1mb_buffer(rows: int) -> tuple[FeedServer, threading.Thread, list]:
    """A feed server with a 1 MB buffer, and a thread feeding it ``rows`` rows of 64 float32 in
    256 KB frames; ``records`` gets the feeding task's record when it returns."""
    srv = FeedServer(SECRET, "127.0.0.1", buffer_bytes=1 << 20).start()
    feed = TrainFeed(SECRET, [srv.address], "1.0", timeout=60, frame_bytes=256 << 10)
    records: list = []
    t = threading.Thread(target=lambda: records.append(feed.feed(0, 0, batches(0, rows, 1000, 64))), daemon=True)
    t.start()
    return srv, t, records


def test_a_full_buffer_holds_the_feeding_task_back():
    srv, t, records = feeding_a_1mb_buffer(rows=20_000)
    time.sleep(1.5)
    assert t.is_alive(), "5 MB cannot fit a 1 MB buffer: the task must wait"
    assert srv.queue.buffered_bytes <= (1 << 20) + (300 << 10)
    assert 0 < srv.queue.rows_in < 20_000
    got = []
    while len(got) < 20_000:
        pieces, _ = srv.take(min(512, 20_000 - len(got)), timeout=10)
        got += arrays_of(pieces, ["id"])["id"].tolist()
    t.join(10)
    assert records[0]["rows"] == 20_000 and got == list(range(20_000))


def test_terminate_stops_the_feeding_task_quickly():
    srv, t, records = feeding_a_1mb_buffer(rows=200_000)
    time.sleep(1.0)
    DataFeed(srv).terminate()
    t.join(10)
    assert not t.is_alive()
    assert records[0]["status"] == "terminated" and records[0]["rows"] < 200_000
    late = TrainFeed(SECRET, [srv.address], "1.0", timeout=60).feed(1, 0, batches(0, 10))
    assert late["status"] == "terminated" and late["rows"] == 0


def test_predictions_go_back_to_the_task_that_sent_each_row(server):
    consumer = threading.Thread(target=predict, args=(server, lambda x: x["id"] * 10, 37), daemon=True)
    consumer.start()
    outputs: dict[int, list] = {}

    def infer(part: int, lo: int, hi: int) -> None:
        task = InferFeed(SECRET, [server.address], timeout=30, keep=["id"])
        pairs = []
        for kept, results in task.run(part, 0, batches(lo, hi, size=25)):
            pairs += list(zip(kept.column(0).to_pylist(), results.column(0).to_pylist(), strict=True))
        outputs[part] = pairs

    tasks = [threading.Thread(target=infer, args=(p, p * 1000, p * 1000 + 400)) for p in range(3)]
    for t in tasks:
        t.start()
    for t in tasks:
        t.join(30)
    tell(server.address, SECRET, fm.End())
    consumer.join(10)
    for p in range(3):
        assert outputs[p] == [(i, i * 10) for i in range(p * 1000, p * 1000 + 400)]


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_a_fed_nodes_child_serves_its_data_feed_before_it_is_told_to_go(tmp_path, tls):
    """The node's child process, started as a barrier task starts it: told where to serve, it
    listens at once (with TLS on an encrypted cluster), while the cluster still forms, and leaves
    quietly when no go ever comes."""
    from tfos_notebook.runtime.node.task.nodeproc import serve_feed, start_child
    from tfos_notebook.runtime.wire import messages as m
    from tfos_notebook.runtime.wire.plan import NodePlan
    from tfos_notebook.runtime.wire.tls import new_identity

    secret = channel.RunSecret(SECRET, new_identity() if tls else None)
    plan = NodePlan("r-early", "127.0.0.1", 1, secret, None, None, [("chief", 0)], "file:///", str(tmp_path))
    child = start_child(plan, 0, [], str(tmp_path))
    proc, status_r = child.proc, child.status_r
    with open(status_r, "rb") as status:
        serve_feed(proc, secret, "127.0.0.1", 1 << 20)
        serving = m.from_json(status.readline())
        assert isinstance(serving, m.FeedServing)
        sample = empty_stream(pa.schema([("id", pa.int64())])).to_pybytes()
        assert tell((serving.host, serving.port), secret, fm.Sample("p", sample)) == fm.Ok()
        proc.stdin.close()  # no go: the run ended before its cluster formed
        assert proc.wait(10) == 0


def spilled(tmp_path, monkeypatch, rows: int):
    """A partition spill of ``rows`` rows (100 a batch), written as an in-stage task writes it."""
    from tfos_notebook.runtime.wire.feed.spill import Spill

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    spill = Spill("run", 0)
    assert sum(b.num_rows for b in spill.tee(batches(0, rows))) == rows
    return spill


def test_a_node_reads_the_batches_of_a_spill_on_its_host_where_the_task_says(server, tmp_path, monkeypatch):
    """In-stage, with more epochs than one, the task writes the partition to a spill and the node's
    feed reads each batch from it (``rows_file``, a reference of a few bytes on the socket): the
    rows arrive exactly once each, epoch after epoch."""
    spill = spilled(tmp_path, monkeypatch, 1000)
    for epoch in range(2):
        pass_id = f"in-stage.{epoch}"
        record = TrainFeed(SECRET, [server.address], pass_id, timeout=30).feed(0, 0, iter(spill.entries))
        assert record["status"] == "fed" and record["rows"] == 1000
        tell(server.address, SECRET, fm.EpochEnd(pass_id))
        assert drain(server) == list(range(1000))
    assert server._server.malformed == 0


def test_a_spill_reference_the_node_cannot_read_is_refused_with_the_reason(server, tmp_path, monkeypatch):
    from dataclasses import replace

    from tfos_notebook.runtime.wire.errors import FeedError

    spill = spilled(tmp_path, monkeypatch, 200)
    (tmp_path / "secrets.txt").write_text("not a spill")
    wrong = [replace(spill.entries[0], path=str(tmp_path / "secrets.txt")),  # not a partition spill
             replace(spill.entries[0], offset=3)]  # no record batch there
    for entry in wrong:
        with pytest.raises(FeedError, match="not a partition spill|no record batch"):
            TrainFeed(SECRET, [server.address], "1.0", timeout=30).feed(1, 0, iter([entry]))


def test_terminate_stops_a_task_feeding_from_a_spill(tmp_path, monkeypatch):
    srv = FeedServer(SECRET, "127.0.0.1", buffer_bytes=1).start()  # one batch at a time
    spill = spilled(tmp_path, monkeypatch, 1000)
    records: list = []
    thread = threading.Thread(target=lambda: records.append(
        TrainFeed(SECRET, [srv.address], "1.0", timeout=30).feed(0, 0, iter(spill.entries))))
    thread.start()
    time.sleep(0.5)  # the task waits for room for its second batch
    srv.terminate()
    thread.join(10)
    assert records and records[0]["status"] == "terminated" and records[0]["rows"] < 1000
    srv.close()


def test_a_dataset_over_a_feed_with_no_row_to_type_it_says_so(server):
    """A node fed an RDD whose partition (or the whole RDD) is empty has no first row to take the
    types from: ``ctx.dataset`` says so, and how to give it rows, instead of declaring no columns."""
    from tfos_notebook.runtime.driver.errors import FeedError
    from tfos_notebook.runtime.node.child.feed.datafeed import make_dataset

    tell(server.address, SECRET, fm.Sample("in-stage", empty_stream(pa.schema([])).to_pybytes()))
    with pytest.raises(FeedError, match="no row to take the data's types from.*rdd.repartition"):
        make_dataset(server, 16)


def test_a_feed_the_task_cannot_read_fails_the_function_where_it_reads_after_the_rows_before(server):
    """An in-stage task that cannot read its rows says so (``fail``): the node's function gets
    the rows fed before it, then the task's ``DataError`` where it reads, on every later read too;
    a function still waiting for the sample gets it there."""
    from tfos_notebook.runtime.wire.errors import DataError

    waiting = FeedServer(SECRET, "127.0.0.1", buffer_bytes=1 << 20).start()
    try:
        tell(waiting.address, SECRET, fm.Fail("column 'x' is None in the first row"))
        with pytest.raises(DataError, match="column 'x' is None"):
            waiting.sample(timeout=5)
    finally:
        waiting.close()
    assert TrainFeed(SECRET, [server.address], "in-stage.0", timeout=30).feed(0, 0, batches(0, 50))["rows"] == 50
    tell(server.address, SECRET, fm.Fail("column 'x' does not match the first row's type"))
    pieces, why = server.take(50, epoch=True, timeout=5)
    assert sum(p.rows for p in pieces) == 50 and why == "full"
    for _ in range(2):
        with pytest.raises(DataError, match="does not match the first row's type"):
            server.take(10, epoch=True, timeout=5)
