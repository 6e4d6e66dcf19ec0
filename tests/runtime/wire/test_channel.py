"""The control channel: mutual authentication on a per-run secret, bounded msgpack frames, and a
server that drops bad connections while it keeps serving good ones."""

from __future__ import annotations

import socket
import struct
import threading

import msgpack
import pytest
from procs import eventually

from tfos_notebook.runtime.driver.errors import ChannelError
from tfos_notebook.runtime.wire import channel


@pytest.fixture
def echo_server():
    secret = channel.new_secret()
    received: list[dict] = []

    def on_message(conn, msg):
        received.append(msg)
        conn.send({"echo": msg})

    server = channel.ControlServer("127.0.0.1", secret, on_message)
    yield server, secret, received
    server.close()




def test_client_with_the_secret_exchanges_messages(echo_server):
    server, secret, received = echo_server
    conn = channel.connect(*server.address, secret)
    conn.send({"type": "hello", "n": 1, "blob": b"\x00\x01"})
    assert conn.recv() == {"echo": {"type": "hello", "n": 1, "blob": b"\x00\x01"}}
    assert received == [{"type": "hello", "n": 1, "blob": b"\x00\x01"}]
    conn.close()


def test_wrong_secret_is_dropped_before_any_message_is_handled(echo_server):
    server, _, received = echo_server
    with pytest.raises((ChannelError, OSError)):
        conn = channel.connect(*server.address, b"x" * 32)
        conn.send({"type": "hello"})
        conn.recv()
    assert eventually(lambda: server.rejected == 1)
    assert received == []


@pytest.mark.parametrize("action", ["flip", "replay", "drop"])
def test_a_frame_altered_replayed_or_dropped_after_the_handshake_ends_the_connection_unread(echo_server, action):
    """Every frame after the handshake carries an HMAC of its sequence number and body under the
    connection's own key: one altered on the way (a byte flipped), replayed, or dropped (so the next
    one arrives out of its turn) is refused before anything of it is decoded, and the connection
    ends, marked forged; the frames before it were handled."""
    from fuzzing import TamperingProxy

    server, secret, received = echo_server
    proxy = TamperingProxy(server.address, action, frame=2)  # frame 0: the handshake's
    conn = channel.connect(*proxy.address, secret)
    for n in range(3):
        conn.send({"n": n})
    assert eventually(lambda: server.rejected == 1)
    # frame 1 handled; frame 2 altered, or dropped (frame 3 then comes out of its turn), or handled and then
    # refused as its copy comes; nothing after that read
    assert received == ([{"n": 0}, {"n": 1}] if action == "replay" else [{"n": 0}])
    conn.close()


def test_frames_are_tagged_in_both_directions_with_keys_of_their_own_connection(echo_server):
    """A frame replayed from another connection of the same run (same secret) is refused too: each
    connection's keys come from its own handshake's nonces."""
    server, secret, received = echo_server
    first, second = channel.connect(*server.address, secret), channel.connect(*server.address, secret)
    assert first._send_mac.key != second._send_mac.key and first._send_mac.key != first._recv_mac.key
    tag = channel.FrameMac(first._send_mac.key).tag(b"\x80")  # frame 0 of the first connection, an empty map
    second.sock.sendall(struct.pack(">I", 1 + len(tag)) + b"\x80" + tag)
    assert eventually(lambda: server.rejected == 1)
    first.send({"still": "first"})
    assert first.recv() == {"echo": {"still": "first"}}
    assert received == [{"still": "first"}]
    first.close()
    second.close()


def test_client_refuses_a_server_that_cannot_prove_the_secret():
    impostor = channel.ControlServer("127.0.0.1", b"y" * 32, lambda c, m: None)
    try:
        # the impostor rejects our proof and closes, or answers with a proof we refuse: either way no session
        with pytest.raises((ChannelError, OSError)):
            channel.connect(*impostor.address, b"z" * 32)
    finally:
        impostor.close()


def test_bad_handshakes_drop_only_that_connection_and_a_malformed_frame_is_counted_not_dropped(echo_server):
    server, secret, received = echo_server
    good = channel.connect(*server.address, secret)
    # garbage instead of a handshake
    raw = socket.create_connection(server.address)
    raw.recv(1024)
    raw.sendall(struct.pack(">I", 5) + b"\xc1\xc1\xc1\xc1\xc1")
    # a handshake frame claiming 1 GB
    big = socket.create_connection(server.address)
    big.recv(1024)
    big.sendall(struct.pack(">I", 1 << 30))
    # authenticated, then a frame that is not a msgpack map and one that is no msgpack at all: counted,
    # and the connection goes on (the frame length keeps the stream in step)
    bad = channel.connect(*server.address, secret)
    bad.send_frame(msgpack.packb([1, 2, 3]))
    bad.send_frame(b"\xc1\xc1")
    assert eventually(lambda: server.rejected == 2 and server.malformed == 2)
    for s in (raw, big):
        s.settimeout(2)
        assert s.recv(10) == b""  # closed by the server
        s.close()
    bad.send({"after": "malformed"})
    assert bad.recv() == {"echo": {"after": "malformed"}}
    bad.close()
    good.send({"still": "served"})
    assert good.recv() == {"echo": {"still": "served"}}
    good.close()


def test_silent_connection_times_out_of_the_handshake(echo_server, monkeypatch):
    server, secret, _ = echo_server
    monkeypatch.setattr(channel, "HANDSHAKE_TIMEOUT", 0.3)
    # the timeout is read when a connection is accepted, so open it after patching
    silent = socket.create_connection(server.address)
    assert eventually(lambda: server.rejected == 1, timeout=3)
    silent.close()


def test_sender_refuses_frames_over_the_limit(echo_server):
    server, secret, _ = echo_server
    conn = channel.connect(*server.address, secret, max_frame=1024)
    with pytest.raises(ChannelError, match="exceeds the 1024-byte frame limit"):
        conn.send({"blob": b"x" * 2048})
    conn.close()


def test_many_clients_in_parallel(echo_server):
    server, secret, received = echo_server
    errors = []

    def client(i):
        try:
            c = channel.connect(*server.address, secret)
            for j in range(20):
                c.send({"i": i, "j": j})
                assert c.recv()["echo"] == {"i": i, "j": j}
            c.close()
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(received) == 160
