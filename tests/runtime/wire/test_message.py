"""Messages are declared once, as annotated fields: the checks that decoding applies are derived from
the annotations when the class is declared, every wrong shape is refused with the message's type
and the field's name, and a data-feed message makes the round trip through a real connection with
its record batch as it was sent."""

from __future__ import annotations

import socket
from dataclasses import field
from typing import Annotated, Literal, TypedDict

import msgpack
import pyarrow as pa
import pytest

from tfos_notebook.runtime.driver.errors import ChannelError
from tfos_notebook.runtime.wire import channel
from tfos_notebook.runtime.wire import messages as m
from tfos_notebook.runtime.wire.checks import Offset
from tfos_notebook.runtime.wire.feed import messages as fm
from tfos_notebook.runtime.wire.feed.codec import batch_bytes, read_stream
from tfos_notebook.runtime.wire.feed.protocol import send
from tfos_notebook.runtime.wire.message import Message, Protocol, encode

TEST = Protocol("test")


def even(v: int) -> int:
    if v % 2:
        raise ValueError(f"expected an even number, got {v}")
    return v


class Point(TypedDict):
    x: int
    label: str


@TEST.message
class Probe(Message):
    TYPE = "probe"
    count: int
    ratio: float
    note: str | None = None
    tags: tuple[str, ...] = ()
    pair: tuple[str, float] = ("", 0.0)
    sizes: dict[str, Offset] = field(default_factory=dict)
    pairs: Annotated[int, even] = 0
    mode: Literal["train", "infer"] = "train"
    points: tuple[Point, ...] = ()
    blob: bytes = b""
    flag: bool = False


GOOD = {"type": "probe", "count": 3, "ratio": 1, "note": None, "tags": ["a", "b"], "pair": ["k", 2],
        "sizes": {"a": 0}, "pairs": 4, "mode": "infer", "points": [{"x": 1, "label": "p", "extra": 0}],
        "blob": b"xyz", "flag": True}


def test_a_well_formed_map_decodes_as_annotated():
    msg = TEST.decode(GOOD)
    assert msg == Probe(count=3, ratio=1.0, note=None, tags=("a", "b"), pair=("k", 2.0), sizes={"a": 0}, pairs=4,
                        mode="infer", points=({"x": 1, "label": "p"},), blob=b"xyz", flag=True)
    assert type(msg.ratio) is float and type(msg.pair[1]) is float  # a number given as an integer
    assert msg.blob is GOOD["blob"]  # bytes are taken as msgpack hands them, never copied
    assert TEST.decode({"type": "probe", "count": 0, "ratio": 0.5}) == Probe(0, 0.5)  # defaults stand in


def test_the_checks_are_derived_once_when_the_class_is_declared():
    assert [name for name, _, _ in Probe.FIELDS] == list(Probe.__dataclass_fields__)
    assert [name for name, _, required in Probe.FIELDS if required] == ["count", "ratio"]
    with pytest.raises(TypeError, match=r"Unsendable.when: no wire check for <class 'object'>"):
        @TEST.message
        class Unsendable(Message):
            TYPE = "unsendable"
            when: object
    with pytest.raises(TypeError, match="already a test message's"):
        @TEST.message
        class Again(Message):
            TYPE = "probe"


@pytest.mark.parametrize("field, value, says", [
    ("count", "3", "expected an integer, got str"),
    ("count", True, "expected an integer, got bool"),
    ("ratio", False, "expected a number, got bool"),
    ("note", 5, "expected a string, got int"),
    ("tags", "ab", "expected a list, got str"),
    ("tags", ["a", 1], "expected a string, got int"),
    ("pair", ["k"], "expected a list of 2 items"),
    ("pair", ["k", "v"], "expected a number, got str"),
    ("sizes", {"a": -1}, r"expected an offset \(0 or more\), got -1"),
    ("sizes", [["a", 1]], "expected a map, got list"),
    ("pairs", 3, "expected an even number, got 3"),
    ("pairs", 2.0, "expected an integer, got float"),
    ("mode", "eval", "expected one of 'train', 'infer', got 'eval'"),
    ("points", [{"x": 1}], "Point without 'label'"),
    ("points", [{"x": "1", "label": "p"}], "Point 'x': expected an integer, got str"),
    ("blob", "xyz", "expected bytes, got str"),
    ("flag", 1, "expected true or false, got int"),
])
def test_each_wrong_shape_is_refused_naming_the_message_and_the_field(field, value, says):
    with pytest.raises(ChannelError, match=f"malformed 'probe' message: field '{field}': {says}"):
        TEST.decode({**GOOD, field: value})


def test_a_missing_field_an_unknown_type_or_another_protocols_message_is_refused():
    with pytest.raises(ChannelError, match="malformed 'probe' message: no 'ratio'"):
        TEST.decode({"type": "probe", "count": 1})
    with pytest.raises(ChannelError, match="unknown type 'nope'"):
        TEST.decode({"type": "nope"})
    with pytest.raises(ChannelError, match="expected a map, got list"):
        TEST.decode([1])
    with pytest.raises(ChannelError, match="unknown type 'ok'"):  # a feed message on the control channel
        m.decode(encode(fm.Ok()))
    with pytest.raises(ChannelError, match="unknown type 'ping'"):
        fm.decode(m.encode(m.Ping(1)))


def test_a_feed_message_makes_the_round_trip_with_its_batch_sent_without_copying():
    batch = pa.RecordBatch.from_pydict({"x": list(range(1000))})
    a, b = socket.socketpair()
    sender, receiver = channel.Connection(a), channel.Connection(b)
    try:
        send(sender, fm.Rows(batch.num_rows, batch_bytes(batch)))  # an Arrow buffer, written as it is
        got = fm.decode(receiver.recv())
        assert isinstance(got, fm.Rows) and got.n == 1000 and isinstance(got.data, bytes)
        assert read_stream(got.data)[1].equals(batch)
        send(sender, fm.Open("1.0", 3, 0, "train"))
        assert fm.decode(receiver.recv()) == fm.Open("1.0", 3, 0, "train")
    finally:
        sender.close()
        receiver.close()
    for msg in (fm.Ready(-1), fm.Ack(True), fm.Error("no"), fm.RowsFile(5, "/p", 0, 9), fm.End()):
        assert fm.decode(msgpack.unpackb(msgpack.packb(encode(msg), use_bin_type=True), raw=False)) == msg
