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


def numbers_array(values: np.ndarray, typ: pa.DataType) -> pa.Array:
    """A 1-d numpy array as an Arrow array of ``typ``: on the same buffer where ``typ`` is an Arrow
    integer or floating type of the array's own dtype, else through pyarrow, which converts it or
    names the mismatch."""
    if (pa.types.is_floating(typ) or pa.types.is_integer(typ)) and values.dtype == numpy_dtype(typ):
        values = np.ascontiguousarray(values)
        return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(values)])
    return pa.array(values, type=typ)


def values_array(values: list, typ: pa.DataType) -> pa.Array:
    """A list of Python values as an Arrow array of ``typ``: Python ints for an integer type, or
    floats for ``double``, through numpy onto a buffer; anything else (a None, a bool, an int out
    of the type's range, another type) through pyarrow, which converts it or names the mismatch."""
    kind = int if pa.types.is_integer(typ) else float if pa.types.is_float64(typ) else None
    if kind is not None and all(type(v) is kind for v in values):  # bool is an int: not taken
        try:
            return numbers_array(np.array(values, numpy_dtype(typ)), typ)
        except OverflowError:  # pyarrow's own error names it
            pass
    return pa.array(values, type=typ)


def binary_array(values: list[bytes]) -> pa.Array:
    """``values`` as an Arrow binary array (no nulls)."""
    offsets = np.zeros(len(values) + 1, np.int32)
    np.cumsum([len(v) for v in values], out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(values))])
