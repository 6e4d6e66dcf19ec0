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
        dtype = numpy_dtype(typ)
        # numpy before 2 wraps an int out of the dtype's range without a word: the range is checked here
        if kind is float or not values or np.iinfo(dtype).min <= min(values) and max(values) <= np.iinfo(dtype).max:
            return numbers_array(np.array(values, dtype), typ)
    return pa.array(values, type=typ)  # pyarrow's own error names what does not fit


def binary_array(values: list[bytes]) -> pa.Array:
    """``values`` as an Arrow binary array (no nulls)."""
    offsets = np.zeros(len(values) + 1, np.int32)
    np.cumsum([len(v) for v in values], out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(values))])


# Record batches cut and joined as pyarrow 8 (Databricks 14.3's) can: ``RecordBatch.drop_columns``,
# ``RecordBatch.select`` and ``pa.concat_batches`` are pyarrow 13-19's.
def without_column(batch: pa.RecordBatch, name: str) -> pa.RecordBatch:
    """``batch`` less its column ``name``, its schema's metadata kept."""
    i = batch.schema.get_field_index(name)
    return pa.RecordBatch.from_arrays(batch.columns[:i] + batch.columns[i + 1:], schema=batch.schema.remove(i))


def select_columns(batch: pa.RecordBatch, names: list[str]) -> pa.RecordBatch:
    """``batch``'s columns ``names``, in that order. Through a table, whose row count stays when
    no column is selected (a batch made of no column has no row)."""
    if batch.num_rows:
        return pa.Table.from_batches([batch]).select(names).to_batches()[0]
    at = [batch.schema.get_field_index(n) for n in names]
    return pa.RecordBatch.from_arrays([batch.column(i) for i in at], schema=pa.schema([batch.schema.field(i) for i in at]))


def concat_batches(parts: list[pa.RecordBatch]) -> pa.RecordBatch:
    """Record batches of one schema as one."""
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]
