"""Arrow at both ends of the data feed (InputMode.SPARK).

On the executors: Python rows of an RDD become Arrow record batches (a DataFrame's batches are
Arrow already). On the nodes: record batches become numpy arrays (``ctx.dataset``), Python rows
(``DataFeed.next_batch``), and predictions become record batches again (inference, in
``predictions.py``).

Row kinds, kept in the schema's metadata so the nodes give rows back in the shape they had:
``row`` (a DataFrame, or an RDD of ``pyspark.sql.Row``), ``tuple`` (RDD of tuples: columns
``_1``, ``_2``...), ``dict`` (RDD of dicts) and ``value`` (RDD of anything else: one column
``value``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

# pyarrow before 14.0.1 runs code from a crafted IPC stream (an ``arrow.py_extension_type`` column:
# CVE-2023-47248); the published hotfix refuses such a column. Every module of the package that
# reads Arrow IPC (the feed's both ends, the spill, the predictions) imports this one first.
import pyarrow_hotfix  # noqa: F401,I001

from ..errors import DataError, FeedError
from .buffers import array_to_numpy, numbers_array, numpy_dtype, values_array

KIND_KEY = b"tfos.kind"
# Field metadata: the column held numpy values, which come back as numpy values of the same dtype:
# arrays (NDARRAY, one per row) or numpy scalars (SCALAR).
NDARRAY_KEY = b"tfos.ndarray"
NDARRAY, SCALAR = b"1", b"scalar"
KINDS = ("row", "tuple", "dict", "value")
PREDICTION = "prediction"


# -- RDD rows -> Arrow (executor side) ---------------------------------------------------------
def arrow_type(value: Any, where: str) -> pa.DataType:
    if value is None:
        raise DataError(f"{where} is None in the first row, so its type is unknown: give it a value in every "
                        "row, or feed a DataFrame, whose schema says the type")
    if isinstance(value, (bool, np.bool_)):
        return pa.bool_()
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return pa.from_numpy_dtype(value.dtype)
        leaf = (arrow_type(value.flat[0], where) if value.dtype == object and value.size
                else pa.from_numpy_dtype(value.dtype))
        for _ in range(value.ndim):
            leaf = pa.list_(leaf)
        return leaf
    if isinstance(value, np.generic):
        return pa.from_numpy_dtype(value.dtype)
    if isinstance(value, int):
        return pa.int64()
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, str):
        return pa.string()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return pa.binary()
    if isinstance(value, (list, tuple)):
        if not value:
            raise DataError(f"{where} is an empty list in the first row, so its element type is unknown: "
                            "feed a DataFrame with an ArrayType column instead")
        return pa.list_(arrow_type(value[0], f"{where}[0]"))
    try:
        return pa.array([value]).type
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
        raise DataError(f"{where} has a {type(value).__name__}, which Arrow cannot carry ({e}): feed numbers, "
                        "strings, bytes, lists or numpy arrays, or a DataFrame") from e


def schema_for_sample(row: Any) -> pa.Schema:
    """The Arrow schema for an RDD whose first row is ``row`` (see the row kinds above)."""
    from pyspark.sql import Row

    if isinstance(row, Row) and hasattr(row, "__fields__"):
        kind, names, values = "row", list(row.__fields__), list(row)
    elif isinstance(row, tuple):
        kind, names, values = "tuple", [f"_{i + 1}" for i in range(len(row))], list(row)
    elif isinstance(row, dict):
        kind, names, values = "dict", [str(k) for k in row], list(row.values())
    else:
        kind, names, values = "value", ["value"], [row]
    fields = [pa.field(n, arrow_type(v, f"column {n!r}"), metadata=numpy_metadata(v))
              for n, v in zip(names, values, strict=True)]
    return pa.schema(fields, metadata={KIND_KEY: kind.encode()})


def numpy_metadata(value: Any) -> dict[bytes, bytes] | None:
    """The field metadata that makes a column of values like ``value`` come back as numpy values."""
    if isinstance(value, np.ndarray):
        return {NDARRAY_KEY: NDARRAY if value.ndim else SCALAR}
    if isinstance(value, np.generic):
        return {NDARRAY_KEY: SCALAR}
    return None


def row_kind(schema: pa.Schema) -> str:
    """The row kind recorded in ``schema`` (``row`` for a DataFrame's schema, which has none)."""
    kind = (schema.metadata or {}).get(KIND_KEY, b"row").decode()
    return kind if kind in KINDS else "row"


def nested_from_ndarray(arr: np.ndarray, typ: pa.DataType) -> pa.Array:
    leaf = typ
    while pa.types.is_list(leaf):
        leaf = leaf.value_type
    out = numbers_array(arr.reshape(-1), leaf)
    for dim in reversed(arr.shape[1:]):
        offsets = numbers_array(np.arange(0, len(out) + 1, dim, dtype=np.int32), pa.int32())
        out = pa.ListArray.from_arrays(offsets, out)
    return out


def _column(values: list, field: pa.Field) -> pa.Array:
    typ = field.type
    if pa.types.is_list(typ) and values and all(isinstance(v, np.ndarray) for v in values):
        shapes = {v.shape for v in values}
        if len(shapes) == 1 and all(v.dtype != object for v in values):
            return nested_from_ndarray(np.stack(values), typ)
        values = [v.tolist() if v.ndim > 1 else v for v in values]
    try:
        return values_array(values, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        raise DataError(f"column {field.name!r} does not match the first row's type {typ}: {e}. Every row "
                        "must have the same types; convert them in Spark first") from e


def rows_to_batch(rows: Sequence, schema: pa.Schema) -> pa.RecordBatch:
    """A record batch of ``schema`` (from :func:`schema_for_sample`) holding ``rows``."""
    kind, names = row_kind(schema), schema.names
    if kind in ("row", "tuple"):
        bad = next((r for r in rows if len(r) != len(names)), None)
        if bad is not None:
            raise DataError(f"a row has {len(bad)} fields where the first row had {len(names)}: every row of "
                            "the RDD must have the same fields")
        columns = [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in names]
    elif kind == "dict":
        try:
            columns = [[r[n] for r in rows] for n in names]
        except KeyError as e:
            raise DataError(f"a row lacks the key {e} that the first row had: every dict row needs the same "
                            "keys") from e
    else:
        columns = [list(rows)]
    return pa.RecordBatch.from_arrays([_column(c, f) for c, f in zip(columns, schema, strict=True)], schema=schema)


def batches_of_rows(rows: Iterator, schema: pa.Schema, max_bytes: int) -> Iterator[pa.RecordBatch]:
    """Record batches of about ``max_bytes`` each from an iterator of rows."""
    size, chunk = 256, []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            batch = rows_to_batch(chunk, schema)
            yield batch
            chunk = []
            per_row = max(1, batch.nbytes // max(1, batch.num_rows))
            size = max(1, min(65536, max_bytes // per_row))
    if chunk:
        yield rows_to_batch(chunk, schema)


def slices(batch: pa.RecordBatch, max_bytes: int) -> Iterator[pa.RecordBatch]:
    """``batch`` cut into zero-copy slices of about ``max_bytes`` (at least one row each)."""
    n = batch.num_rows
    if n == 0:
        return
    per = max(1, int(n * max_bytes / max(1, batch.nbytes)))
    for start in range(0, n, per):
        yield batch.slice(start, per)


# -- Arrow -> numpy / Python (node side) -------------------------------------------------------
def column_to_numpy(col: pa.Array, name: str) -> np.ndarray:
    """One column as a numpy array; lists of equal length become extra dimensions
    (``array<array<float>>`` of 28x28 images -> shape ``(n, 28, 28)``)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if col.null_count:
        raise FeedError(f"column {name!r} has null values: fill or drop them in Spark (df.fillna / df.dropna) "
                        "before feeding")
    shape = [len(col)]
    arr = col
    while is_list_type(arr.type):
        # the rows' values, cut from the list's child as its offsets say (``ListArray.flatten`` imports
        # pandas on pyarrow 8, Databricks 14.3's: 0.2-0.4 s of a node before its first batch)
        if pa.types.is_fixed_size_list(arr.type):
            size = arr.type.list_size
            shape.append(size)
            arr = arr.values.slice(arr.offset * size, len(arr) * size)
        else:
            offsets = array_to_numpy(arr.offsets)
            lengths = np.diff(offsets)
            if len(lengths) and (lengths != lengths[0]).any():
                raise FeedError(f"column {name!r} has arrays of different lengths ({lengths.min()} to "
                                f"{lengths.max()}): tensors need equal shapes, so pad or trim them in Spark, "
                                "or read rows with DataFeed")
            shape.append(int(lengths[0]) if len(lengths) else 0)
            arr = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        if arr.null_count:
            raise FeedError(f"column {name!r} has null array elements: fill them in Spark before feeding")
    t = arr.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        raise FeedError(f"column {name!r} holds {t}, which has no TensorFlow counterpart: cast it in Spark "
                        "(to a number, an array of numbers, or a string) or drop it")
    return array_to_numpy(arr).reshape(shape)


def is_list_type(typ: pa.DataType) -> bool:
    """Whether ``typ`` is an Arrow list of any kind (list, large list, fixed-size list)."""
    return pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ)


def _leaf_dtype(typ: pa.DataType) -> np.dtype:
    while is_list_type(typ):
        typ = typ.value_type
    return numpy_dtype(typ)


def python_column(col: pa.Array, field: pa.Field) -> list:
    """The values of one column as Python objects; a column marked as numpy (NDARRAY_KEY) gives
    numpy arrays or scalars of its dtype."""
    numpy = (field.metadata or {}).get(NDARRAY_KEY)
    if numpy == SCALAR:
        return list(array_to_numpy(col))
    if numpy:
        try:
            return list(column_to_numpy(col, field.name))
        except FeedError:  # ragged: one array per row
            dtype = _leaf_dtype(field.type)
            return [np.asarray(v, dtype=dtype) for v in col.to_pylist()]
    if is_list_type(col.type):
        try:  # arrays of equal lengths: through numpy, much faster than Arrow's own to_pylist
            return column_to_numpy(col, field.name).tolist()
        except FeedError:  # ragged, nulls, or values numpy does not hold
            pass
    return col.to_pylist()


def batch_to_rows(batch: pa.RecordBatch, kind: str | None = None) -> list:
    """The rows of ``batch`` as Python objects of its row kind (``kind``, else the one its schema
    records; pyspark Rows for DataFrames); values an RDD held as numpy values come back as numpy
    values of the same dtype."""
    kind = kind or row_kind(batch.schema)
    columns = [python_column(c, f) for c, f in zip(batch.columns, batch.schema, strict=True)]
    if kind == "dict":
        return [dict(zip(batch.schema.names, values, strict=True)) for values in zip(*columns, strict=True)]
    if kind == "value":
        return columns[0]
    if kind == "tuple":
        return list(zip(*columns, strict=True))
    from pyspark.sql import Row

    make = Row(*batch.schema.names)
    return [make(*values) for values in zip(*columns, strict=True)]


# -- wire --------------------------------------------------------------------------------------
def batch_bytes(batch: pa.RecordBatch) -> pa.Buffer:
    """``batch`` as an Arrow IPC stream (schema + batch), ready for the wire without copies."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


def empty_stream(schema: pa.Schema) -> pa.Buffer:
    """An Arrow IPC stream with ``schema`` and no batches."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema):
        pass
    return sink.getvalue()


def read_stream(data: bytes | bytearray | memoryview) -> tuple[pa.Schema, pa.RecordBatch | None]:
    """The schema and the (single) record batch of an IPC stream made by :func:`batch_bytes`, zero-copy."""
    reader = pa.ipc.open_stream(pa.py_buffer(data))
    batches = list(reader)
    if len(batches) > 1:
        raise FeedError(f"expected one record batch per frame, got {len(batches)}")
    return reader.schema, (batches[0] if batches else None)
