"""The authenticated control channel between the driver and the nodes (the handshake and
the run's secret are ``handshake.py``'s).

Wire format: each frame is a 4-byte big-endian length followed by a msgpack map, and after the
handshake by the map's authentication tag. Frames are bounded in size, and the channel itself
never unpickles anything (see ``values.py`` for the one value that may be pickled inside a frame).

Every connection starts with a mutual challenge-response over a per-run secret (32 random bytes
that travel to the executors inside the Spark task closure)::

    server -> {"v": 1, "nonce": Ns}
    client -> {"nonce": Nc, "proof": HMAC(secret, "client" | Ns | Nc)}
    server -> {"proof": HMAC(secret, "server" | Nc | Ns)}

Then every frame, in each direction, carries ``HMAC-SHA256(K, seq | map)``: ``K`` that direction's
key for this connection (``handshake.frame_keys``: from the secret and both nonces), ``seq`` the
frame's number in that direction (from 0). The receiver checks the tag before it decodes anything,
so a frame altered on the way, replayed (from this connection or another), reordered or dropped is
refused: :class:`FrameForged` ends the connection, and the frame is never read.

A connection that fails the handshake, sends an oversized frame or a forged one, or stays silent
during the handshake is dropped and logged; the server goes on serving the others. After the
handshake, a frame that is authentic but not a msgpack map, or a message its handler refuses
(``ChannelError``), is logged and counted in ``ControlServer.malformed`` and the connection goes
on: the frame's length keeps the stream in step, and a bad message must never cost a node its
connection.

The channel authenticates; it also encrypts when the secret is a :class:`RunSecret` with a TLS
identity (a run on a cluster that asks for encrypted traffic, see ``tls.py``): every connection
then speaks TLS 1.3 first, the server presenting the run's certificate and the client accepting
only that one, and the challenge-response runs inside it.
"""

from __future__ import annotations

import hashlib
import hmac
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


class FrameForged(ChannelError):
    """A frame's authentication tag is wrong: it was altered, replayed, reordered or dropped on the
    way (or sent by someone without the connection's key). It is not read, and the connection ends."""


TAG_BYTES = 32  # HMAC-SHA256


class FrameMac:
    """One direction's frame tags: HMAC-SHA256 under ``key`` of the frame's sequence number and body."""

    def __init__(self, key: bytes) -> None:
        self.key, self.seq = key, 0

    def tag(self, *parts: Any) -> bytes:
        """The tag of the next frame, whose body is ``parts`` in order."""
        mac = hmac.new(self.key, self.seq.to_bytes(8, "big"), hashlib.sha256)
        for part in parts:
            mac.update(part)
        self.seq += 1
        return mac.digest()


log = logging.getLogger(__name__)

DEFAULT_MAX_FRAME = 64 << 20
HANDSHAKE_TIMEOUT = 5.0
# A gang's nodes all connect at once. With Python's default listen backlog (128), the connections
# past it are dropped by the kernel, and with SYN cookies a node can believe it is connected while
# the server never sees it: a thousand simulated nodes left 295 stuck that way. The kernel caps
# this at net.core.somaxconn.
LISTEN_BACKLOG = 4096
_HEADER = struct.Struct(">I")

__all__ = ["Connection", "ControlServer", "FrameForged", "FrameTooLarge", "MalformedFrame", "RunSecret", "Secret", "connect",
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
        self._send_mac: FrameMac | None = None  # set once the handshake is done (authenticate)
        self._recv_mac: FrameMac | None = None
        self.closed = False
        self.attrs: dict[str, Any] = {}

    def authenticate(self, send_key: bytes, recv_key: bytes) -> None:
        """From now on, tag every frame sent and check every frame received (see the module's docstring)."""
        self._send_mac, self._recv_mac = FrameMac(send_key), FrameMac(recv_key)

    def _tail(self) -> int:
        return TAG_BYTES if self._send_mac is not None else 0

    def send(self, msg: dict) -> None:
        self.send_frame(msgpack.packb(msg, use_bin_type=True))

    def send_frame(self, data: bytes) -> None:
        """Send ``data`` as one frame's body (``send`` packs a map into it), tagged once the
        connection is authenticated."""
        if len(data) + self._tail() > self.max_frame:
            raise ChannelError(f"message of {len(data)} bytes exceeds the {self.max_frame}-byte frame limit")
        with self._send_lock:
            mac = self._send_mac
            tag = mac.tag(data) if mac is not None else b""
            self.sock.sendall(_HEADER.pack(len(data) + len(tag)) + data + tag)

    def send_with_bin(self, msg: dict, key: str, payload: Any) -> None:
        """Send ``msg`` plus ``key``: ``payload`` as a msgpack bin field, writing the bytes-like
        ``payload`` (an Arrow buffer...) to the socket without first copying it into the frame."""
        view = memoryview(payload).cast("B")
        head = bytearray(_PACKER.pack_map_header(len(msg) + 1))
        for k, v in msg.items():
            head += msgpack.packb(k, use_bin_type=True) + msgpack.packb(v, use_bin_type=True)
        head += msgpack.packb(key, use_bin_type=True) + b"\xc6" + _HEADER.pack(view.nbytes)  # bin 32
        size = len(head) + view.nbytes + self._tail()
        if size > self.max_frame:
            raise ChannelError(f"message of {size} bytes exceeds the {self.max_frame}-byte frame limit")
        with self._send_lock:
            mac = self._send_mac
            self.sock.sendall(_HEADER.pack(size) + head)
            self.sock.sendall(view)
            if mac is not None:
                self.sock.sendall(mac.tag(head, view))

    def recv(self, max_size: int | None = None) -> dict:
        limit = self.max_frame if max_size is None else max_size
        (size,) = _HEADER.unpack(_recv_exact(self.sock, _HEADER.size))
        if size > limit:
            raise FrameTooLarge(f"frame of {size} bytes exceeds the {limit}-byte limit")
        data = memoryview(_recv_exact(self.sock, size))
        mac = self._recv_mac
        if mac is not None:
            if size < TAG_BYTES:
                raise FrameForged(f"a frame of {size} bytes is too short to carry its authentication tag")
            data, tag = data[:-TAG_BYTES], data[-TAG_BYTES:]
            if not hmac.compare_digest(mac.tag(data), tag):
                raise FrameForged(f"frame {mac.seq - 1} failed its authentication: it was altered, replayed, "
                                  "reordered or dropped on the way, or not sent by the run's other end")
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
        except FrameForged as e:  # nothing of it was read; the connection's owner is told why it ended
            conn.attrs["forged"] = str(e)
            self._reject(conn, peer, str(e))
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
