"""Arrow columns built on, and read from, their buffers, without pyarrow's pandas shim.

pyarrow's ``pa.array`` (of a numpy array or of a Python list), ``pa.scalar``, ``Array.to_numpy``,
``DataType.to_pandas_dtype`` and ``RecordBatch.from_pylist`` import pandas on their first call:
0.2-0.4 s of CPU in a process that has not imported it yet. A node has two such processes: its
child, which reads the batches (before its first step), and its Spark task, a fresh Python worker
that makes the batches of an RDD's rows (before it sends the first) and its own output (as it
returns); each while the node's other processes run on the same cores. Numbers without nulls and
bytes are built on, and numbers read from, their Arrow buffers instead; anything else goes
through pyarrow.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

# The Python type of each value in a column that numpy can take whole (bool is an int: excluded).
_PLAIN = {"int64": int, "double": float}


def numpy_dtype(typ: pa.DataType) -> np.dtype:
    """The numpy dtype of an Arrow number or boolean type."""
    if pa.types.is_boolean(typ):
        return np.dtype(bool)
    if pa.types.is_floating(typ) or pa.types.is_integer(typ):
        kind = "f" if pa.types.is_floating(typ) else "i" if pa.types.is_signed_integer(typ) else "u"
        return np.dtype(f"{kind}{typ.bit_width // 8}")
    return np.dtype(typ.to_pandas_dtype())


def array_to_numpy(arr: pa.Array) -> np.ndarray:
    """A flat Arrow array as numpy: numbers without nulls zero-copy from its buffer (read-only,
    as pyarrow's own zero-copy conversion), anything else through pyarrow."""
    typ = arr.type
    if arr.null_count or not (pa.types.is_floating(typ) or pa.types.is_integer(typ)):
        return arr.to_numpy(zero_copy_only=False)
    dtype = numpy_dtype(typ)
    if not len(arr):
        return np.empty(0, dtype)
    return np.frombuffer(arr.buffers()[1], dtype, count=len(arr), offset=arr.offset * dtype.itemsize)


def numbers_array(values: np.ndarray, typ: pa.DataType) -> pa.Array | None:
    """A 1-d numpy array of ``typ``'s own dtype (``typ`` an Arrow integer or floating type) as an
    Arrow array on the same buffer; None where they differ, for the caller to ask pyarrow, which
    converts or names the mismatch."""
    if not (pa.types.is_floating(typ) or pa.types.is_integer(typ)) or values.dtype != numpy_dtype(typ):
        return None
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(values)])


def plain_numbers(values: list, typ: pa.DataType) -> pa.Array | None:
    """A list of Python ints for an ``int64`` column, or of floats for a ``double`` one, as an
    Arrow array; None for anything else (a None, a bool, an int beyond int64, another type)."""
    kind = _PLAIN.get(str(typ))
    if kind is None or not all(type(v) is kind for v in values):
        return None
    try:
        return numbers_array(np.array(values, numpy_dtype(typ)), typ)
    except OverflowError:
        return None


def binary_array(values: list[bytes]) -> pa.Array:
    """``values`` as an Arrow binary array (no nulls)."""
    offsets = np.zeros(len(values) + 1, np.int32)
    np.cumsum([len(v) for v in values], out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(values))])
