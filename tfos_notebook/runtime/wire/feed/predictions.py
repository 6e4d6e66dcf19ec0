"""Predictions at both ends of an inference feed (InputMode.SPARK): what a node's function returns
becomes a record batch (:func:`results_to_batch`), and comes back as Python objects of the kind it
had (:func:`result_values`), set beside the kept columns of its rows (:func:`join`); the row kinds
and numpy marks are ``codec.py``'s."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import FeedError
from .codec import (
    KIND_KEY,
    NDARRAY,
    NDARRAY_KEY,
    PREDICTION,
    SCALAR,
    arrow_type,
    batch_to_rows,
    nested_from_ndarray,
    numpy_metadata,
)


def _as_numpy(value: Any) -> Any:
    return value.numpy() if hasattr(value, "numpy") and not isinstance(value, np.ndarray) else value


def _result_column(name: str, value: Any) -> tuple[pa.Array, dict[bytes, bytes] | None]:
    """One column of results, one per row, from an array (its first axis is the rows) or a
    sequence, and its field metadata: numpy values are marked so that they come back as numpy
    values of the same dtype (see NDARRAY_KEY)."""
    value = _as_numpy(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        raise FeedError(f"results for {name!r} are a single value ({value!r}): return one result per input "
                        "row, e.g. an array whose first axis is the rows")
    if isinstance(value, np.ndarray) and value.dtype != object:
        if value.ndim == 1:
            return pa.array(value), {NDARRAY_KEY: SCALAR}
        leaf: pa.DataType = pa.from_numpy_dtype(value.dtype)
        for _ in range(value.ndim - 1):
            leaf = pa.list_(leaf)
        return nested_from_ndarray(value, leaf), {NDARRAY_KEY: NDARRAY}
    items = [_as_numpy(v) for v in value]
    first = items[0] if items else None
    try:
        if isinstance(first, (np.ndarray, np.generic)) and all(
                type(v) is type(first) and np.shape(v) == np.shape(first) and v.dtype == first.dtype for v in items):
            return _result_column(name, np.stack(items))
        if isinstance(first, np.ndarray):  # arrays of different shapes: one nested list each
            return pa.array([v.tolist() for v in items], type=arrow_type(first, name)), numpy_metadata(first)
        return pa.array(items), None
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        raise FeedError(f"results for {name!r} cannot become an Arrow column ({e}): return numbers, strings, "
                        "lists or arrays, one per input row") from e


def results_to_batch(results: Any, rows: int | None = None) -> pa.RecordBatch:
    """Predictions (for ``rows`` input rows, when given) as a record batch: a dict gives one column
    per key, a record batch is taken as is, a sequence of tuples one column per tuple element, and
    anything else (array, tensor, list) one column ``prediction``. The kind of each result
    (numpy array or scalar of a dtype, tuple, Python value) is recorded in the schema, so that
    :func:`result_values` gives back objects of the same kind."""
    results = _as_numpy(results)
    if isinstance(results, pa.RecordBatch):
        batch = results
    elif isinstance(results, pa.Table):
        batch = results.combine_chunks().to_batches()[0] if results.num_rows else pa.RecordBatch.from_pylist(
            [], schema=results.schema)
    else:
        if isinstance(results, dict):
            kind, named = "dict", {str(k): v for k, v in results.items()}
        elif not isinstance(results, np.ndarray) and _all_tuples(results := list(results)):
            kind, named = "tuple", {f"_{i + 1}": list(c) for i, c in enumerate(zip(*results, strict=True))}
        else:
            kind, named = "value", {PREDICTION: results}
        columns = [(name, *_result_column(name, value)) for name, value in named.items()]
        schema = pa.schema([pa.field(n, a.type, metadata=meta) for n, a, meta in columns],
                           metadata={KIND_KEY: kind.encode()})
        batch = pa.RecordBatch.from_arrays([a for _, a, _ in columns], schema=schema)
    if rows is not None and batch.num_rows != rows:
        raise FeedError(f"got {batch.num_rows} results for a batch of {rows} rows: return exactly one result "
                        "per input row, in order")
    return batch


def _all_tuples(items: list) -> bool:
    """Whether ``items`` are plain tuples of one length (pyspark Rows and named tuples excepted)."""
    return bool(items) and all(type(v) is tuple and len(v) == len(items[0]) for v in items) and bool(items[0])


def result_values(batch: pa.RecordBatch) -> list:
    """Predictions as Python objects, one per row, of the kind the node gave (see
    :func:`results_to_batch`): numpy arrays and scalars keep their dtype, tuples stay tuples. A
    record batch the node made itself gives values for one column, else a dict per row."""
    if KIND_KEY not in (batch.schema.metadata or {}):
        return batch_to_rows(batch, "value" if batch.num_columns == 1 else "dict")
    return batch_to_rows(batch)


def join(kept: pa.RecordBatch | None, results: pa.RecordBatch, out: pa.Schema) -> pa.RecordBatch:
    """Kept input columns and prediction columns side by side, typed as ``out``."""
    arrays = list(kept.columns) if kept is not None else []
    pred_fields = list(out)[len(arrays):]
    if results.num_columns != len(pred_fields):
        raise FeedError(f"the nodes returned {results.num_columns} prediction columns {results.schema.names} "
                        f"but the output schema has {len(pred_fields)} {[f.name for f in pred_fields]}: make "
                        "schema= match what the function returns")
    for col, field in zip(results.columns, pred_fields, strict=True):
        try:
            arrays.append(col.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise FeedError(f"prediction column {field.name!r} of type {col.type} cannot become {field.type} "
                            f"({e}): make schema= match what the function returns") from e
    return pa.RecordBatch.from_arrays(arrays, schema=out)
