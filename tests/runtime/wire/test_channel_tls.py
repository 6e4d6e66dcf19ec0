"""The channel over TLS (a run on a cluster that asks for encrypted traffic): what crosses the
wire is unreadable, only the run's own certificate is accepted, a client without TLS is dropped,
and one reading thread with many sending threads on each side keeps every message intact."""

from __future__ import annotations

import socket
import ssl
import threading

import pytest
from procs import eventually

from tfos_notebook.runtime.wire import channel
from tfos_notebook.runtime.wire.errors import ChannelError
from tfos_notebook.runtime.wire.tls import new_identity

IDENTITY = new_identity()
MARKER = b"readable-if-not-encrypted-7f3a"


class RecordingProxy:
    """A TCP relay on 127.0.0.1 that keeps a copy of every byte it carries, both ways."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target, self.seen = target, bytearray()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = self._listener.getsockname()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        while data := src.recv(65536):
            self.seen += data
            dst.sendall(data)
        dst.close()

    def close(self) -> None:
        self._listener.close()


def echo_server(secret):
    return channel.ControlServer("127.0.0.1", secret, lambda conn, msg: conn.send({"echo": msg}))


@pytest.fixture
def tls_echo():
    """An echo server of a run whose channels are encrypted, and that run's secret."""
    secret = channel.RunSecret(channel.new_secret(), IDENTITY)
    server = echo_server(secret)
    yield server, secret
    server.close()


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plain"])
def test_only_a_tls_channel_hides_what_it_carries_from_the_network(tls):
    secret = channel.RunSecret(channel.new_secret(), IDENTITY if tls else None)
    server = echo_server(secret)
    proxy = RecordingProxy(server.address)
    try:
        conn = channel.connect(*proxy.address, secret, timeout=5)
        big = MARKER * 200_000  # 6 MB: several sending chunks
        conn.send({"note": MARKER})
        assert conn.recv() == {"echo": {"note": MARKER}}
        conn.send_with_bin({"t": "rows"}, "data", big)
        assert conn.recv() == {"echo": {"t": "rows", "data": big}}
        conn.close()
        assert (MARKER in proxy.seen) is not tls
        assert len(proxy.seen) > 2 * len(big)
    finally:
        proxy.close()
        server.close()


def test_a_client_without_tls_is_dropped_by_a_tls_server(tls_echo):
    server, secret = tls_echo
    with pytest.raises((ChannelError, OSError)):  # each waits for the other's hello: the client gives up
        channel.connect(*server.address, secret.key, timeout=1).recv()
    assert eventually(lambda: server.rejected == 1, timeout=3)


def test_a_client_refuses_a_server_presenting_another_runs_certificate():
    key = channel.new_secret()
    server = echo_server(channel.RunSecret(key, new_identity()))
    try:
        with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
            channel.connect(*server.address, channel.RunSecret(key, IDENTITY), timeout=5)
    finally:
        server.close()


def test_the_identity_never_shows_its_key():
    assert "PRIVATE" not in repr(IDENTITY) and "PRIVATE KEY" in IDENTITY.key_pem.decode()


def test_a_reader_and_many_senders_on_each_side_keep_every_message_intact(thread_exceptions):
    secret = channel.RunSecret(channel.new_secret(), IDENTITY)
    senders, each = 4, 1000
    server_conns: list[channel.Connection] = []

    def on_message(conn, msg):
        if not server_conns:
            server_conns.append(conn)
        conn.send({"echo": msg["n"], "from": msg["from"], "pad": msg["pad"]})

    server = channel.ControlServer("127.0.0.1", secret, on_message)
    conn = channel.connect(*server.address, secret, timeout=10)
    got: list[dict] = []

    def read() -> None:
        while len(got) < senders * each + each:
            got.append(conn.recv())

    def send(sender: int) -> None:
        for n in range(each):
            conn.send({"n": n, "from": sender, "pad": bytes(n * 37 % 20000)})

    def push() -> None:  # the server side sends from another thread while it echoes
        assert eventually(lambda: bool(server_conns), timeout=10)
        for n in range(each):
            server_conns[0].send({"pushed": n, "pad": bytes(n * 53 % 30000)})

    threads = [threading.Thread(target=read), threading.Thread(target=push),
               *(threading.Thread(target=send, args=(i,)) for i in range(senders))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(got) == senders * each + each
        for sender in range(senders):
            echoed = [m["echo"] for m in got if m.get("from") == sender]
            assert echoed == list(range(each))
        assert [m["pushed"] for m in got if "pushed" in m] == list(range(each))
        assert all(len(m["pad"]) == (m["echo"] * 37 % 20000 if "echo" in m else m["pushed"] * 53 % 30000)
                   for m in got)
    finally:
        conn.close()
        server.close()


def test_readable_sees_what_tls_already_took_off_the_socket(tls_echo):
    server, secret = tls_echo
    conn = channel.connect(*server.address, secret, timeout=5)
    assert not conn.readable()
    conn.send({"a": 1})
    conn.send({"b": 2})
    assert eventually(conn.readable, timeout=5)
    assert conn.recv() == {"echo": {"a": 1}}
    assert eventually(conn.readable, timeout=5)  # the second frame may already sit decrypted in TLS
    assert conn.recv() == {"echo": {"b": 2}}
    assert not conn.readable()
    conn.close()
