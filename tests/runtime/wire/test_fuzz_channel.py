"""Fuzzing the control channel: a ``ControlServer`` (and a run's own, mid-run) gets random and
mutated frames before, during and after the handshake. Every bad connection is dropped and
counted, every bad message on an authenticated connection is counted and the connection goes on,
no exception escapes a thread, and the server keeps serving a legitimate node."""

from __future__ import annotations

import logging
import os
import pickle
import socket
import threading

import msgpack
import pytest
from fakerun import FakeNode, start
from fuzzing import (
    HEADER,
    MESSAGE_TYPES,
    frame,
    hello_then,
    message_maps,
    raw_frames,
    rss_mib,
    settles,
    values,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tfos_notebook.runtime.driver.errors import ChannelError
from tfos_notebook.runtime.wire import channel, handshake
from tfos_notebook.runtime.wire import messages as m

pytestmark = pytest.mark.fuzz

MAX_FRAME = 64 << 10


@pytest.fixture
def decoding_server(caplog):
    """A server whose handler decodes each message (a refused one is counted as malformed) and
    answers ``{"ok": type}``; yields it, its secret and the connections it saw close."""
    secret = channel.new_secret()
    closed: list[channel.Connection] = []

    def on_message(conn, raw):
        conn.send({"ok": m.decode(raw).TYPE})

    server = channel.ControlServer("127.0.0.1", secret, on_message, closed.append, max_frame=MAX_FRAME)
    caplog.set_level(logging.WARNING, logger="tfos_notebook.runtime.wire.channel")
    yield server, secret, closed
    server.close()
    assert "handler failed" not in caplog.text


def still_serves(server: channel.ControlServer, secret: bytes) -> None:
    conn = channel.connect(*server.address, secret, timeout=5)
    conn.send(m.encode(m.Stop()))
    assert conn.recv() == {"ok": "stop"}
    conn.close()


def decodes_to(payload: bytes) -> str | None:
    """The type the server answers for a frame holding ``payload`` (None: it is refused)."""
    try:
        return m.decode(msgpack.unpackb(payload, raw=False)).TYPE
    except (ValueError, msgpack.UnpackException, ChannelError):
        return None


def client_hello(secret: bytes, server_hello: bytes) -> bytes:
    """The framed hello a client with ``secret`` sends in answer to the framed ``server_hello``."""
    nonce = os.urandom(32)
    server_nonce = msgpack.unpackb(server_hello[HEADER.size:])["nonce"]
    return frame(msgpack.packb({"nonce": nonce, "proof": handshake.proof(secret, b"client", server_nonce, nonce)}))


wrong_hellos = st.fixed_dictionaries(
    {"nonce": st.binary(max_size=40) | values, "proof": st.binary(min_size=32, max_size=32) | values}
).map(lambda h: frame(msgpack.packb(h, use_bin_type=True)))


def test_unauthenticated_garbage_and_wrong_proofs_are_dropped_one_by_one_while_the_server_serves(
        decoding_server, thread_exceptions):
    server, secret, closed = decoding_server
    baseline_threads, baseline_rss = threading.active_count(), rss_mib()
    sent = 0

    @settings(max_examples=200)
    @given(data=st.lists(raw_frames | wrong_hellos, min_size=1, max_size=3).map(b"".join))
    def garbage(data):
        nonlocal sent
        sent += 1
        hello_then(server.address, data)
        assert settles(lambda: server.rejected == sent)

    garbage()
    # a proof replayed from another connection does not prove anything: the server's nonce changed
    with socket.create_connection(server.address) as first:
        replayed = client_hello(secret, first.recv(4096))
    hello_then(server.address, replayed)
    assert settles(lambda: server.rejected == sent + 2)  # the replay, and the connection it was taken from
    still_serves(server, secret)
    # only the legitimate connection got past the handshake (and its close reached on_close)
    assert settles(lambda: len(closed) == 1 and server.connections() == [])
    assert settles(lambda: threading.active_count() <= baseline_threads)
    assert rss_mib() - baseline_rss < 64


def test_authenticated_malformed_frames_and_messages_are_counted_and_the_connection_goes_on(
        decoding_server, thread_exceptions):
    server, secret, _ = decoding_server
    conn = channel.connect(*server.address, secret, timeout=5)
    refused = 0

    @settings(max_examples=300)
    @given(payload=st.one_of(values.map(lambda v: msgpack.packb(v, use_bin_type=True)),
                             message_maps().map(lambda v: msgpack.packb(v, use_bin_type=True)),
                             st.binary(max_size=200)))
    def messages(payload):
        nonlocal refused
        answer = decodes_to(payload)
        refused += answer is None
        conn.send_frame(payload)
        if answer is not None:
            assert conn.recv() == {"ok": answer}
        conn.send(m.encode(m.Stop()))  # in step: the next answer is this one's
        assert conn.recv() == {"ok": "stop"}
        assert server.malformed == refused

    messages()
    assert refused > 100  # most random maps are refused; some valid ones got through above
    assert server.rejected == 0 and len(server.connections()) == 1
    conn.close()
    still_serves(server, secret)


def test_an_oversized_header_drops_only_that_connection_and_a_truncated_frame_is_a_close(
        decoding_server, thread_exceptions):
    server, secret, closed = decoding_server
    bystander = channel.connect(*server.address, secret, timeout=5)

    @settings(max_examples=40)
    @given(size=st.integers(MAX_FRAME + 1, 2 ** 32 - 1) | st.integers(1, MAX_FRAME),
           sent=st.binary(max_size=64))
    def cut(size, sent):
        rejected, ended = server.rejected, len(closed)
        conn = channel.connect(*server.address, secret, timeout=5)
        conn.sock.sendall(HEADER.pack(size) + sent[:size - 1])
        if size <= MAX_FRAME:  # the rest never comes: the peer closes mid-frame
            conn.close()
        assert settles(lambda: len(closed) == ended + 1)
        assert server.rejected == rejected + (size > MAX_FRAME)
        conn.close()

    cut()
    assert len(server.connections()) == 1  # the bystander's
    bystander.send(m.encode(m.Stop()))
    assert bystander.recv() == {"ok": "stop"}
    bystander.close()


def is_node_query(raw) -> bool:
    """Whether ``raw`` is a well-formed ``NodeQuery``, which any authenticated peer (a Spark task
    feeding the run) may send, and which is answered rather than refused."""
    try:
        return isinstance(m.decode(raw), m.NodeQuery)
    except ChannelError:
        return False


def test_a_run_in_flight_finishes_with_its_result_while_its_control_port_is_fuzzed(thread_exceptions, caplog):
    caplog.set_level(logging.WARNING)
    release = threading.Event()

    def script(plan, task, cancel):
        node = FakeNode(plan, task)
        assert isinstance(node.register(), m.Cluster)
        node.send(m.NodeStateReport("running", 1))
        while not release.is_set():
            node.answer_pings(0.2)  # a live node answers the driver's heartbeats
        node.send(m.Logs((("stdout", f"task {task} is done"),)))
        node.send(m.Result(ok=True, value=pickle.dumps(42 if task == 0 else None), value_type="int", exit_code=0))
        node.close()
        return {"task": task}

    run = start(script)
    run.wait_for_reservations(10)
    plan = run.plan(run.attempt)
    address = (plan.server_host, plan.server_port)
    server = run.control.server
    fuzzer = channel.connect(*address, plan.secret, timeout=5)
    unauthenticated = authenticated = 0

    @settings(max_examples=200)
    @given(raw=st.one_of(raw_frames, message_maps().map(lambda v: ("auth", v)), values.map(lambda v: ("auth", v))))
    def traffic(raw):
        nonlocal unauthenticated, authenticated
        if isinstance(raw, bytes):
            unauthenticated += 1
            hello_then(address, raw)
        else:  # from an authenticated peer that never registered: every message but a node query is refused
            authenticated += not is_node_query(raw[1])
            fuzzer.send_frame(msgpack.packb(raw[1], use_bin_type=True))

    traffic()
    assert settles(lambda: server.rejected == unauthenticated and server.malformed == authenticated)
    assert run.node_states() == {"chief:0": "running", "worker:0": "running"}
    release.set()
    assert run.wait(10) == 42
    assert run.node_states() == {"chief:0": "finished", "worker:0": "finished"}
    assert run.attempt == 0
    fuzzer.close()
    assert "handler failed" not in caplog.text


hostile_paths = st.sampled_from(["events.out.tfevents.1.node", "sub/events.out.tfevents.2", "../escape", "/tmp/abs",
                                 "a/../../b", "a\\b", "", ".", "x\x00y", "C:/x", "a//b"]) | st.text(max_size=12)
file_chunks = st.lists(st.tuples(hostile_paths, st.integers(-(2 ** 20), 2 ** 40), st.binary(max_size=64)),
                       max_size=3).map(lambda chunks: {"type": "files", "chunks": [list(c) for c in chunks]})
NOT_ENDING = tuple(t for t in MESSAGE_TYPES if t not in (m.Register, m.Result))


def test_a_registered_node_sending_nonsense_never_ends_the_run_nor_writes_outside_the_mirror(
        tmp_path, thread_exceptions, caplog):
    from tfos_notebook.tensorboard.mirror import Mirror

    caplog.set_level(logging.WARNING)
    release = threading.Event()
    fuzzer: list[FakeNode] = []

    def script(plan, task, cancel):
        node = FakeNode(plan, task)
        assert isinstance(node.register(), m.Cluster)
        node.send(m.NodeStateReport("running", 1))
        if task == 2:
            fuzzer.append(node)
        release.wait(120)
        node.send(m.Result(ok=True, value=pickle.dumps(42 if task == 0 else None), value_type="int", exit_code=0))
        node.close()
        return {"task": task}

    mirror = Mirror(str(tmp_path / "mirror"))
    run = start(script, nodes=3)
    run.set_file_sink(mirror.receive)
    run.wait_for_reservations(10)
    assert settles(lambda: fuzzer)
    node = fuzzer[0]

    @settings(max_examples=200)
    @given(raw=message_maps(NOT_ENDING) | file_chunks)
    def nonsense(raw):
        node.conn.send_frame(msgpack.packb(raw, use_bin_type=True))

    nonsense()
    # refused by the protocol or the coordinator, or (unsafe file names) by the mirror; others were handled
    assert settles(lambda: 0 < run.control.server.malformed < 200 and mirror.rejected > 0)
    release.set()
    assert run.wait(10) == 42
    assert run.node_states() == {"chief:0": "finished", "worker:0": "finished", "worker:1": "finished"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mirror"]  # nothing escaped the mirror
    assert all(p.resolve().is_relative_to(tmp_path / "mirror") for p in (tmp_path / "mirror").rglob("*"))
    assert "handler failed" not in caplog.text and "sink failed" not in caplog.text


def test_a_negative_file_offset_is_malformed_rather_than_read_as_bytes_before_the_start():
    for raw in ({"type": "files", "chunks": [["events.out.tfevents.1", -5, b"12345678"]]},
                {"type": "files_rewind", "files": {"events.out.tfevents.1": -1}}):
        with pytest.raises(ChannelError, match="expected an offset"):
            m.decode(raw)
