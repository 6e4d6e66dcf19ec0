"""The authenticated control channel between the driver and the nodes (the handshake and
the run's secret are ``handshake.py``'s).

Wire format: each frame is a 4-byte big-endian length followed by a msgpack map. Nothing on this
channel is ever unpickled, and frames are bounded in size.

Every connection starts with a mutual challenge-response over a per-run secret (32 random bytes
that travel to the executors inside the Spark task closure)::

    server -> {"v": 1, "nonce": Ns}
    client -> {"nonce": Nc, "proof": HMAC(secret, "client" | Ns | Nc)}
    server -> {"proof": HMAC(secret, "server" | Nc | Ns)}

A connection that fails this, sends an oversized frame, or stays silent during the handshake is
dropped and logged; the server goes on serving the others. After the handshake, a frame that is
not a msgpack map, or a message its handler refuses (``ChannelError``), is logged and counted in
``ControlServer.malformed`` and the connection goes on: the frame's length keeps the stream in
step, and a bad message must never cost a node its connection.

The channel authenticates; it also encrypts when the secret is a :class:`RunSecret` with a TLS
identity (a run on a cluster that asks for encrypted traffic, see ``tls.py``): every connection
then speaks TLS 1.3 first, the server presenting the run's certificate and the client accepting
only that one, and the challenge-response runs inside it.
"""

from __future__ import annotations

import logging
import select
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

import msgpack

from .errors import ChannelError
from .handshake import (
    RunSecret,
    Secret,
    client_handshake,
    new_secret,
    secret_from_json,
    secret_to_json,
    server_handshake,
    unpack,
)
from .tls import TlsSocket


class MalformedFrame(ChannelError):
    """A whole frame arrived but is not a msgpack map; the stream is still in step."""


class FrameTooLarge(ChannelError):
    """A frame's announced length is over the limit; the stream cannot be followed further."""

log = logging.getLogger(__name__)

DEFAULT_MAX_FRAME = 64 << 20
HANDSHAKE_TIMEOUT = 5.0
# A gang's nodes all connect at once. With Python's default listen backlog (128), the connections
# past it are dropped by the kernel, and with SYN cookies a node can believe it is connected while
# the server never sees it: a thousand simulated nodes left 295 stuck that way. The kernel caps
# this at net.core.somaxconn.
LISTEN_BACKLOG = 4096
_HEADER = struct.Struct(">I")

__all__ = ["Connection", "ControlServer", "FrameTooLarge", "MalformedFrame", "RunSecret", "Secret", "connect",
           "new_secret", "secret_from_json", "secret_to_json"]
_PACKER = msgpack.Packer(use_bin_type=True)


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise ConnectionError("connection closed")
        got += k
    return buf


class Connection:
    """One authenticated, framed connection; ``send`` is safe from several threads."""

    def __init__(self, sock: socket.socket, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.sock = sock
        self.max_frame = max_frame
        self._send_lock = threading.Lock()
        self.closed = False
        self.attrs: dict[str, Any] = {}

    def send(self, msg: dict) -> None:
        data = msgpack.packb(msg, use_bin_type=True)
        if len(data) > self.max_frame:
            raise ChannelError(f"message of {len(data)} bytes exceeds the {self.max_frame}-byte frame limit")
        with self._send_lock:
            self.sock.sendall(_HEADER.pack(len(data)) + data)

    def send_with_bin(self, msg: dict, key: str, payload: Any) -> None:
        """Send ``msg`` plus ``key``: ``payload`` as a msgpack bin field, writing the bytes-like
        ``payload`` (an Arrow buffer...) to the socket without first copying it into the frame."""
        view = memoryview(payload).cast("B")
        head = bytearray(_PACKER.pack_map_header(len(msg) + 1))
        for k, v in msg.items():
            head += msgpack.packb(k, use_bin_type=True) + msgpack.packb(v, use_bin_type=True)
        head += msgpack.packb(key, use_bin_type=True) + b"\xc6" + _HEADER.pack(view.nbytes)  # bin 32
        size = len(head) + view.nbytes
        if size > self.max_frame:
            raise ChannelError(f"message of {size} bytes exceeds the {self.max_frame}-byte frame limit")
        with self._send_lock:
            self.sock.sendall(_HEADER.pack(size) + head)
            self.sock.sendall(view)

    def recv(self, max_size: int | None = None) -> dict:
        limit = self.max_frame if max_size is None else max_size
        (size,) = _HEADER.unpack(_recv_exact(self.sock, _HEADER.size))
        if size > limit:
            raise FrameTooLarge(f"frame of {size} bytes exceeds the {limit}-byte limit")
        data = _recv_exact(self.sock, size)
        try:
            msg = msgpack.unpackb(data, raw=False)
        except (ValueError, msgpack.UnpackException) as e:
            raise MalformedFrame(f"malformed frame: {e}") from e
        if not isinstance(msg, dict):
            raise MalformedFrame("malformed frame: not a map")
        return msg

    def readable(self) -> bool:
        """Whether received bytes wait to be read, without blocking (TLS may hold some already
        taken off the socket, which ``select`` cannot see)."""
        if isinstance(self.sock, TlsSocket) and self.sock.pending():
            return True
        return bool(select.select([self.sock], [], [], 0)[0])

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError as e:  # not connected any more: closing is all that is left
            log.debug("shutdown of a closed connection: %s", e)
        self.sock.close()


def connect(host: str, port: int, secret: Secret, timeout: float = 30.0,
            max_frame: int = DEFAULT_MAX_FRAME) -> Connection:
    """Open an authenticated connection to a ``ControlServer`` (over TLS when ``secret`` carries a
    TLS identity); raises ``ChannelError`` when the server cannot prove it knows the secret, and
    ``ssl.SSLError`` when it does not present the run's certificate."""
    secret, identity = unpack(secret)
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if identity is not None:
        try:
            sock = TlsSocket.client(sock, identity)
        except OSError:  # ssl.SSLError included
            sock.close()
            raise
    conn = Connection(sock, max_frame)
    try:
        client_handshake(conn, secret)
    except (OSError, ChannelError):
        conn.close()
        raise
    sock.settimeout(None)
    return conn


class ControlServer:
    """A TCP server for one run: authenticates each connection, then hands every message to
    ``on_message(conn, msg)`` on that connection's thread, and ``on_close(conn)`` when it ends.

    Bound only to ``host`` (the driver address the executors use), on an ephemeral port. ``close``
    stops the accept thread and every connection's thread and joins them.
    """

    def __init__(self, host: str, secret: Secret, on_message: Callable[[Connection, dict], None],
                 on_close: Callable[[Connection], None] | None = None,
                 max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.secret, self.tls = unpack(secret)
        self.on_message = on_message
        self.on_close = on_close or (lambda conn: None)
        self.max_frame = max_frame
        self.rejected = 0  # connections dropped for failed auth, a silent handshake or an oversized frame
        self.malformed = 0  # frames or messages refused on connections that were kept
        self._listener = socket.create_server((host, 0), backlog=LISTEN_BACKLOG)
        self.host, self.port = self._listener.getsockname()[:2]
        self._conns: set[Connection] = set()
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name=f"tfos-control-{self.port}", daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                sock, peer = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(sock, peer), daemon=True,
                                      name=f"tfos-conn-{peer[0]}:{peer[1]}")
            with self._lock:
                if self._stopped.is_set():
                    sock.close()
                    return
                self._threads.add(thread)
            thread.start()

    def _reject(self, conn: Connection, peer, why: str) -> None:
        with self._lock:
            self.rejected += 1
        log.warning("tfos control channel: dropped connection from %s:%s: %s", peer[0], peer[1], why)
        conn.close()

    def _serve(self, sock: socket.socket, peer) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(HANDSHAKE_TIMEOUT)
        if self.tls is not None:
            try:
                sock = TlsSocket.server(sock, self.tls)
            except OSError as e:  # ssl.SSLError included: not our TLS client
                self._reject(Connection(sock, self.max_frame), peer, f"TLS handshake failed: {e}")
                return
        conn = Connection(sock, self.max_frame)
        conn.attrs["peer"] = peer
        try:
            if not server_handshake(conn, self.secret):
                self._reject(conn, peer, "failed authentication")
                return
            sock.settimeout(None)
        except (OSError, ChannelError) as e:
            self._reject(conn, peer, f"handshake failed: {e}")
            return
        with self._lock:
            self._conns.add(conn)
        try:
            while not self._stopped.is_set():
                try:
                    msg = conn.recv()  # FrameTooLarge: the stream is out of step, the connection is dropped
                except MalformedFrame as e:
                    self._refused(peer, e)
                    continue
                try:
                    self.on_message(conn, msg)
                except ChannelError as e:
                    self._refused(peer, e)
        except ChannelError as e:
            self._reject(conn, peer, str(e))
        except (OSError, ConnectionError) as e:  # the peer closed the connection: its end, not an error
            log.debug("tfos control channel: %s:%s closed (%s)", peer[0], peer[1], e)
        except Exception:
            log.exception("tfos control channel: handler failed for %s:%s", peer[0], peer[1])
        finally:
            with self._lock:
                self._conns.discard(conn)
                self._threads.discard(threading.current_thread())
            conn.close()
            self.on_close(conn)

    def _refused(self, peer, error: ChannelError) -> None:
        with self._lock:
            self.malformed += 1
        log.warning("tfos control channel: refused a message from %s:%s: %s", peer[0], peer[1], error)

    def connections(self) -> list[Connection]:
        with self._lock:
            return list(self._conns)

    def close(self, join_timeout: float = 5.0) -> None:
        """Stop accepting, close every connection (``on_close`` runs for each) and join the threads."""
        self._stopped.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError as e:
            log.debug("shutdown of the listener: %s", e)
        self._listener.close()
        for conn in self.connections():
            conn.close()
        with self._lock:
            threads = [self._thread, *self._threads]
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(join_timeout)
                if thread.is_alive():
                    log.warning("tfos control channel: thread %s did not end within %.0fs", thread.name,
                                join_timeout)
