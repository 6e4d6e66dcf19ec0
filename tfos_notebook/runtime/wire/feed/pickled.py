"""An RDD's pickled batches read straight into Arrow columns, without a Python object per number.

An RDD dealt to the nodes (``stage.Dealer``) reaches each node's task as the batches PySpark
pickled (pickle protocol 5). Unpickling them makes a Python float of every number, which Arrow
then reads back one by one: for rows of 784 floats that is most of the node task's first epoch.
For the rows TensorFlowOnSpark programs feed (a list of floats or of small ints, or a tuple of such
lists, floats and ints) :class:`Decoder` reads the pickle's opcodes itself and takes each run of
numbers with numpy. Anything else in a batch (another opcode, an object pickled twice by reference, an int
among the floats, a float where the first row had an int) makes it give up on that batch, which is
then unpickled as before; both ways give the same columns (``tests/runtime/feed/test_pickled.py``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from itertools import chain, groupby
from typing import Any

import numpy as np
import pyarrow as pa

from .buffers import numbers_array, values_array
from .codec import NDARRAY_KEY, batches_of_rows, row_kind, schema_for_sample
from .stage import dealt_rows

# Pickle opcodes (the ``pickle`` module's names).
PROTO, FRAME, STOP, MEMOIZE = 0x80, 0x95, ord("."), 0x94
EMPTY_LIST, MARK, APPEND, APPENDS = ord("]"), ord("("), ord("a"), ord("e")
BINFLOAT, BININT1, BININT2, BININT, LONG1 = ord("G"), ord("K"), ord("M"), ord("J"), 0x8A
TUPLE, TUPLE_OF = ord("t"), {1: 0x85, 2: 0x86, 3: 0x87}
FLOATS = np.dtype([("op", "u1"), ("value", ">f8")])  # a run of BINFLOAT opcodes
SMALL_INTS = np.dtype([("op", "u1"), ("value", "u1")])  # a run of BININT1 opcodes (ints 0-255)
# List columns the decoder reads: code -> (the opcode of every item, a run's layout, the column's dtype)
RUNS = {"lf": (BINFLOAT, FLOATS, np.float64), "li": (BININT1, SMALL_INTS, np.int64)}
INT64 = (-(1 << 63), (1 << 63) - 1)


class Unsupported(Exception):
    """The batch holds something the decoder does not read: it is unpickled instead."""


class Decoder:
    """Reads pickled batches of rows of one schema: column codes ``f`` (float64), ``i`` (int64),
    ``lf`` (list of float64) and ``li`` (list of int64, read where every item is 0-255, as pixels
    are); ``tupled`` rows are tuples of the columns, else one value."""

    def __init__(self, codes: tuple[str, ...], tupled: bool) -> None:
        self.codes, self.tupled = codes, tupled
        self._run = 0  # the last run's length: the next list's first guess

    @classmethod
    def of(cls, schema: pa.Schema) -> Decoder | None:
        """The decoder for rows of ``schema``, or None where it has none."""
        kind = row_kind(schema)
        if kind not in ("tuple", "value"):
            return None
        codes = []
        for field in schema:
            typ = field.type
            if field.metadata and NDARRAY_KEY in field.metadata:  # numpy values, pickled as such
                return None
            if pa.types.is_float64(typ):
                codes.append("f")
            elif pa.types.is_int64(typ):
                codes.append("i")
            elif pa.types.is_list(typ) and pa.types.is_float64(typ.value_type):
                codes.append("lf")
            elif pa.types.is_list(typ) and pa.types.is_int64(typ.value_type):
                codes.append("li")
            else:
                return None
        return cls(tuple(codes), kind == "tuple")

    def decode(self, record: bytes) -> _Chunk | None:
        """The columns of the rows pickled in ``record``, or None where the decoder gives up."""
        try:
            return self._rows(_unframed(record))
        except (Unsupported, IndexError, ValueError):
            return None

    def batches(self, chunks: Iterable[_Chunk], schema: pa.Schema, max_bytes: int) -> Iterator[pa.RecordBatch]:
        """Record batches of about ``max_bytes`` each of the decoded ``chunks``, in order."""
        held: list[_Chunk] = []
        size = 0
        for chunk in chunks:
            held.append(chunk)
            size += chunk.nbytes
            if size >= max_bytes:
                yield self._batch(held, schema)
                held, size = [], 0
        if held:
            yield self._batch(held, schema)

    # -- reading -----------------------------------------------------------------------------
    def _rows(self, b: bytes) -> _Chunk:
        chunk = _Chunk(self.codes)
        p = _after_memo(b, _expect(b, 0, EMPTY_LIST))
        marked = self.tupled and len(self.codes) > 3  # such a row starts with its own MARK
        while b[p] != STOP:  # the batch's list: chunks of MARK rows APPENDS, or one row and APPEND
            if b[p] == MARK and (not marked or b[p + 1] == MARK):
                p += 1
                while b[p] != APPENDS:
                    p = self._row(b, p, chunk)
                p += 1
            else:
                p = _expect(b, self._row(b, p, chunk), APPEND)
        if p != len(b) - 1:
            raise Unsupported("bytes after STOP")
        return chunk

    def _row(self, b: bytes, p: int, chunk: _Chunk) -> int:
        n = len(self.codes)
        if self.tupled and n > 3:
            p = _expect(b, p, MARK)
        for column, code in enumerate(self.codes):
            p = self._list(b, p, chunk, column, code) if code in RUNS else _scalar(b, p, code, chunk.scalars[column])
        if self.tupled:
            p = _after_memo(b, _expect(b, p, TUPLE if n > 3 else TUPLE_OF[n]))
        chunk.rows += 1
        return p

    def _list(self, b: bytes, p: int, chunk: _Chunk, column: int, code: str) -> int:
        op, layout, _ = RUNS[code]
        p = _after_memo(b, _expect(b, p, EMPTY_LIST))
        length = 0
        while True:
            if b[p] == MARK:  # a run of up to 1000 items
                run = self._items(b, p + 1, op, layout)
                n = len(run)
                chunk.values[column].append(run["value"])
                p = _expect(b, p + 1 + layout.itemsize * n, APPENDS)
            elif b[p] == op and b[p + layout.itemsize] == APPEND:  # a run of one
                n = 1
                chunk.values[column].append(np.frombuffer(b, layout, 1, p)["value"])
                p += layout.itemsize + 1
            else:
                break
            length += n
        chunk.lengths[column].append(length)
        return p

    def _items(self, b: bytes, p: int, op: int, layout: np.dtype) -> np.ndarray:
        """The ``op`` opcodes that follow one another from ``p`` up to APPENDS, as ``layout``."""
        n, size = self._run, layout.itemsize
        if n and p + size * n < len(b) and b[p + size * n] == APPENDS:
            run = np.frombuffer(b, layout, n, p)
            if (run["op"] == op).all():
                return run
        n = 0
        while b[p + size * n] == op:
            n += 1
        self._run = n
        return np.frombuffer(b, layout, n, p)

    def _batch(self, held: list[_Chunk], schema: pa.Schema) -> pa.RecordBatch:
        arrays = []
        for column, code in enumerate(self.codes):
            typ = schema.field(column).type
            if code in RUNS:
                lengths = [n for chunk in held for n in chunk.lengths[column]]
                offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
                np.cumsum(lengths, out=offsets[1:])
                runs = [run for chunk in held for run in chunk.values[column]]
                dtype = RUNS[code][2]
                values = np.concatenate(runs, dtype=dtype) if runs else np.empty(0, dtype)
                arrays.append(pa.ListArray.from_arrays(numbers_array(offsets, pa.int32()),
                                                       numbers_array(values, typ.value_type), type=typ))
            else:
                values = [v for chunk in held for v in chunk.scalars[column]]
                arrays.append(values_array(values, typ))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


class _Chunk:
    """The columns of one decoded batch: scalars as Python values, lists as their lengths and the
    runs of their numbers (views of the batch's bytes)."""

    def __init__(self, codes: tuple[str, ...]) -> None:
        self.rows = 0
        self.scalars: list[list] = [[] for _ in codes]
        self.lengths: list[list[int]] = [[] for _ in codes]
        self.values: list[list[np.ndarray]] = [[] for _ in codes]

    @property
    def nbytes(self) -> int:
        return 8 * (sum(len(run) for runs in self.values for run in runs) + self.rows * len(self.scalars))


def rdd_batches(items: Iterable, serializer: Any, max_bytes: int) -> Iterator[pa.RecordBatch]:
    """Record batches of about ``max_bytes`` of an RDD partition's rows, in the Arrow schema of the
    partition's first row (``schema_for_sample``): ``items`` are the serialized batches of rows that
    ``serializer`` pickled (dealt out, or gathered whole), or the rows themselves where it is None.
    Nothing for an empty partition."""
    items = iter(items)
    if serializer is None:
        for row in items:
            yield from batches_of_rows(chain([row], items), schema_for_sample(row), max_bytes)
        return
    for record in items:
        rows = serializer.loads(record)
        if rows:
            yield from dealt_batches(chain([record], items), serializer, schema_for_sample(rows[0]), max_bytes)
            return


def dealt_batches(records: Iterable[bytes], serializer: Any, schema: pa.Schema,
                  max_bytes: int) -> Iterator[pa.RecordBatch]:
    """Record batches of about ``max_bytes`` of the rows of the serialized batches a ``Dealer``
    sent (``serializer`` pickled them), in their order: read by :class:`Decoder` where it can,
    unpickled otherwise."""
    decoder = Decoder.of(schema)
    if decoder is None:
        yield from batches_of_rows(dealt_rows(records, serializer), schema, max_bytes)
        return
    decoded = ((record, decoder.decode(record)) for record in records)
    for fast, group in groupby(decoded, key=lambda pair: pair[1] is not None):
        if fast:
            yield from decoder.batches((chunk for _, chunk in group), schema, max_bytes)
        else:
            yield from batches_of_rows(dealt_rows((r for r, _ in group), serializer), schema, max_bytes)


def _unframed(data: bytes) -> bytes:
    """The opcodes of a protocol 4-5 pickle, its PROTO and FRAME headers taken out."""
    if len(data) < 3 or data[0] != PROTO or data[1] < 4:
        raise Unsupported("not a protocol 4 or 5 pickle")
    parts, p = [], 2
    while p < len(data) and data[p] == FRAME:
        n = int.from_bytes(data[p + 1:p + 9], "little")
        parts.append(data[p + 9:p + 9 + n])
        p += 9 + n
    parts.append(data[p:])  # a last frame too small to be framed
    return b"".join(parts)


def _expect(b: bytes, p: int, opcode: int) -> int:
    if b[p] != opcode:
        raise Unsupported(f"opcode {b[p]:#x} at {p}, expected {opcode:#x}")
    return p + 1


def _after_memo(b: bytes, p: int) -> int:
    return p + 1 if b[p] == MEMOIZE else p


def _scalar(b: bytes, p: int, code: str, out: list) -> int:
    op = b[p]
    if code == "f":
        if op != BINFLOAT:
            raise Unsupported("not a float")
        out.append(struct.unpack_from(">d", b, p + 1)[0])
        return p + 9
    if op == BININT1:
        out.append(b[p + 1])
        return p + 2
    if op == BININT2:
        out.append(int.from_bytes(b[p + 1:p + 3], "little"))
        return p + 3
    if op == BININT:
        out.append(int.from_bytes(b[p + 1:p + 5], "little", signed=True))
        return p + 5
    if op == LONG1:
        n = b[p + 1]
        value = int.from_bytes(b[p + 2:p + 2 + n], "little", signed=True)
        if not INT64[0] <= value <= INT64[1]:
            raise Unsupported("an int beyond int64")
        out.append(value)
        return p + 2 + n
    raise Unsupported("not an int")
