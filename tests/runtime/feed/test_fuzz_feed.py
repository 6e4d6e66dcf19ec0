"""Fuzzing a node's data feed: unauthenticated garbage, and authenticated requests with random and
mutated fields. A refused request is answered ``error`` and counted, the connection goes on, no
exception escapes a thread, and the feed still takes a partition exactly once afterwards."""

from __future__ import annotations

import logging

import msgpack
import pytest
from fuzzing import hello_then, raw_frames, settles, values
from hypothesis import given, settings
from hypothesis import strategies as st

from tfos_notebook.runtime.driver.errors import FeedError
from tfos_notebook.runtime.node.child.feed.server import FeedServer
from tfos_notebook.runtime.wire import channel
from tfos_notebook.runtime.wire.feed import messages as fm
from tfos_notebook.runtime.wire.feed.codec import batch_bytes
from tfos_notebook.runtime.wire.feed.protocol import MAX_FRAME, FeedClient, tell
from tfos_notebook.runtime.wire.feed.tasks import TrainFeed

from .test_feed_server import SECRET, batches, drain

pytestmark = pytest.mark.fuzz

SYNC = {"type": "sync"}  # an unknown request: the node answers it with an error, in order


@pytest.fixture
def feed(caplog):
    caplog.set_level(logging.WARNING)
    srv = FeedServer(SECRET, "127.0.0.1", buffer_bytes=64 << 20).start()
    yield srv
    srv.close()
    assert "handler failed" not in caplog.text and "did not end" not in caplog.text


arrow = st.sampled_from([batch_bytes(next(batches(0, 3))).to_pybytes(),
                         batch_bytes(next(batches(0, 1, width=2))).to_pybytes()[:-9],
                         b"ARROW1", b""])
requests = st.fixed_dictionaries(
    {"type": st.sampled_from(["sample", "open", "rows", "rows_file", "done", "epoch_end", "ok"])
     | st.text(max_size=8)},
    optional={"pass_id": values, "part": st.integers(-2, 3) | values, "attempt": st.integers(-1, 2) | values,
              "mode": st.sampled_from(["train", "infer"]) | values, "rows": st.integers(-1, 5) | values,
              "n": st.integers(-1, 5) | values, "data": arrow | st.binary(max_size=64) | values, "path": values,
              "offset": st.integers(-1, 9) | values, "length": values},
)


def test_authenticated_malformed_requests_are_refused_and_counted_and_the_feed_goes_on(feed, thread_exceptions):
    server = feed._server

    @settings(max_examples=150)
    @given(sent=st.lists(requests, min_size=1, max_size=4))
    def session(sent):
        client = FeedClient(feed.address, SECRET, timeout=10)
        refused = server.malformed
        for msg in sent:
            client.conn.send_frame(msgpack.packb(msg, use_bin_type=True))
        client.conn.send(SYNC)
        while (reply := client.recv()) != fm.Error("malformed message: unknown type 'sync'"):
            assert isinstance(reply, (fm.Ok, fm.Ready, fm.Stopped, fm.Ack, fm.Error)), reply
        assert settles(lambda: server.malformed > refused)  # the sync at least (counted after its answer)
        client.close()

    session()
    assert settles(lambda: server.connections() == [])
    assert server.rejected == 0
    # a partition nobody fuzzed is fed whole, and exactly once
    before = feed.queue.rows_in
    clean = TrainFeed(SECRET, [feed.address], "clean", timeout=30)
    assert clean.feed(part=0, attempt=0, batches=batches(0, 500))["rows"] == 500
    assert clean.feed(part=0, attempt=1, batches=batches(0, 500))["status"] == "already"
    assert feed.queue.rows_in - before == 500


def test_a_connection_opens_one_partition_so_a_retry_of_it_is_never_locked_out(feed, thread_exceptions):
    first = FeedClient(feed.address, SECRET, timeout=10)
    assert isinstance(first.request(fm.Open("p", 0, 0, "train")), fm.Ready)
    with pytest.raises(FeedError, match="a connection feeds one partition"):
        first.request(fm.Open("p", 1, 0, "train"))
    first.close()
    retry = TrainFeed(SECRET, [feed.address], "p", timeout=10).feed(part=0, attempt=1, batches=batches(0, 10))
    assert retry["status"] == "fed" and retry["rows"] == 10
    assert tell(feed.address, SECRET, fm.EpochEnd("p")) == fm.Ok()
    assert drain(feed) == list(range(10))


def test_unauthenticated_garbage_never_reaches_the_feed(feed, thread_exceptions):
    server = feed._server
    sent = 0

    @settings(max_examples=60)
    @given(data=raw_frames)
    def garbage(data):
        nonlocal sent
        sent += 1
        hello_then(feed.address, data)
        assert settles(lambda: server.rejected == sent)

    garbage()
    assert feed.queue.rows_in == 0 and server.malformed == 0
    conn = channel.connect(*feed.address, SECRET, max_frame=MAX_FRAME)
    conn.close()
    assert tell(feed.address, SECRET, fm.Sample("s", batch_bytes(next(batches(0, 1))).to_pybytes())) == fm.Ok()
    schema, row = feed.sample(1)
    assert schema.names == ["id", "x"] and row.num_rows == 1
