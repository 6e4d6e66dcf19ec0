"""What the fuzz tests (marked ``fuzz``) throw at the project's servers: hypothesis strategies for
msgpack values, control-protocol maps and raw frames, and the raw-socket moves of an
unauthenticated peer. Everything stays on loopback."""

from __future__ import annotations

import dataclasses
import socket
import struct

import msgpack
import psutil
from hypothesis import strategies as st

from tfos_notebook.runtime.host.timeouts import Deadline
from tfos_notebook.runtime.wire import messages as m

HEADER = struct.Struct(">I")

scalars = (st.none() | st.booleans() | st.integers(-(2 ** 63), 2 ** 64 - 1)
           | st.floats(allow_nan=True) | st.text(max_size=40) | st.binary(max_size=64))

#: any msgpack value, nested a little
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=12)

MESSAGE_TYPES: tuple[type[m.Message], ...] = tuple(m.CONTROL.types.values())


@st.composite
def message_maps(draw, types: tuple[type[m.Message], ...] = MESSAGE_TYPES) -> dict:
    """A map tagged as one of the protocol's messages whose fields are present or missing, and
    random values or plausible ones (so that some maps get past the type checks)."""
    cls = draw(st.sampled_from(types))
    raw: dict = {"type": cls.TYPE}
    for f in dataclasses.fields(cls):
        choice = draw(st.sampled_from(("missing", "random", "int", "text", "bytes", "list")))
        if choice != "missing":
            raw[f.name] = draw({"random": values, "int": st.integers(-3, 2 ** 40), "text": st.text(max_size=20),
                                "bytes": st.binary(max_size=32),
                                "list": st.lists(st.lists(scalars, max_size=3), max_size=3)}[choice])
    if draw(st.booleans()):
        raw[draw(st.text(max_size=8))] = draw(values)
    return raw


def frame(payload: bytes) -> bytes:
    """``payload`` with the channel's 4-byte length header."""
    return HEADER.pack(len(payload)) + payload


#: what a peer may send in place of one frame: random bytes with or without a header, a frame
#: holding any msgpack value, a header announcing more than will come (then a close), a huge header
raw_frames = st.one_of(
    st.binary(max_size=300),
    st.binary(max_size=300).map(frame),
    values.map(lambda v: frame(msgpack.packb(v, use_bin_type=True))),
    st.tuples(st.integers(8, 10_000), st.binary(max_size=7)).map(lambda t: HEADER.pack(t[0]) + t[1]),
    st.integers(2 ** 20, 2 ** 32 - 1).map(HEADER.pack),
)


def hello_then(address: tuple[str, int], data: bytes) -> None:
    """Open a raw connection, read whatever the server says first, send ``data`` and close."""
    with socket.create_connection(address, timeout=5) as sock:
        try:
            sock.recv(4096)
            sock.sendall(data)
        except OSError:
            pass  # the server may close first: what matters is what it does next


def settles(predicate, timeout: float = 5.0) -> bool:
    """Whether ``predicate()`` comes true within ``timeout`` seconds (polled every 5 ms)."""
    return Deadline(timeout).wait_until(predicate, interval=0.005)


def rss_mib() -> float:
    return psutil.Process().memory_info().rss / 2 ** 20


class TamperingProxy:
    """A loopback proxy between a client and ``target`` that does something to one of the client's
    frames on its way, the ``frame``-th (counted from 0; the handshake's one frame is frame 0), or
    the first that holds the bytes ``holding``: ``flip`` one byte of it, ``replay`` it (sent twice),
    or ``drop`` it. Frames are told apart by their length headers; everything else passes unchanged,
    both ways. One connection."""

    def __init__(self, target: tuple[str, int], action: str, frame: int = -1, holding: bytes = b"") -> None:
        import threading

        self.target, self.frame, self.action, self.holding = target, frame, action, holding
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()[:2]
        self.done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        import threading

        client, _ = self.listener.accept()
        upstream = socket.create_connection(self.target)
        threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()
        try:
            self._frames(client, upstream)
        except OSError:
            pass
        finally:
            self.done.set()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass

    def _frames(self, src: socket.socket, dst: socket.socket) -> None:
        index, acted = 0, False
        while True:
            header = _recv_all(src, HEADER.size)
            body = _recv_all(src, HEADER.unpack(header)[0])
            frame = header + body
            target = not acted and (index == self.frame or bool(self.holding) and self.holding in body)
            acted |= target
            if target and self.action == "flip":
                frame = frame[:HEADER.size + 2] + bytes([frame[HEADER.size + 2] ^ 0x01]) + frame[HEADER.size + 3:]
            if not (target and self.action == "drop"):
                dst.sendall(frame)
            if target and self.action == "replay":
                dst.sendall(frame)
            index += 1


def _recv_all(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data
