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

from tfos_notebook.runtime.wire import messages as m
from tfos_notebook.runtime.wire.timeouts import Deadline

HEADER = struct.Struct(">I")

scalars = (st.none() | st.booleans() | st.integers(-(2 ** 63), 2 ** 64 - 1)
           | st.floats(allow_nan=True) | st.text(max_size=40) | st.binary(max_size=64))

#: any msgpack value, nested a little
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=12)

MESSAGE_TYPES: tuple[type[m.Message], ...] = tuple(m.Message.__subclasses__())


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
