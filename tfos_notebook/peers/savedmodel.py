"""Predicting with a SavedModel inside Spark tasks, for ``pipeline.TFModel``: each task loads the
model once per Python worker (kept for the worker's later tasks), feeds Arrow batches of the
mapped columns to a signature and gives back Arrow batches of its outputs.

The output DataFrame's schema comes from the signature itself, read by a one-task Spark job
(:func:`output_schema`), so the driver never imports TensorFlow. Outputs become Spark types as
Python's ``tolist()`` would make them (as TensorFlowOnSpark's did): floats -> double, integers ->
long, booleans -> boolean, strings -> binary, one array level per dimension beyond the batch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from ..runtime.wire.feed.codec import column_to_numpy

DEFAULT_SIGNATURE = "serving_default"
SPEC_DDL = "side string, name string, dtype string, rank int"  # rank -1: unknown
_loaded: dict[tuple, Any] = {}  # (export_dir, tags, signature) -> the loaded model, per Python worker


def single_node_env(args: Any) -> None:
    """Prepare this process for a single-node TensorFlow: ``sys.argv`` from an argv list (or
    ``args.argv``), and ``CUDA_VISIBLE_DEVICES`` from the GPUs Spark assigned the task (the first
    ``args.num_gpus`` of them when given; none when Spark assigned none)."""
    if isinstance(args, list):
        sys.argv = args
    elif getattr(args, "argv", None):
        sys.argv = args.argv
    from pyspark import TaskContext

    task = TaskContext.get()
    resources = task.resources() if task is not None else {}
    gpus = list(resources["gpu"].addresses) if "gpu" in resources else []
    wanted = getattr(args, "num_gpus", None) if not isinstance(args, list) else None
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus[:wanted] if wanted is not None else gpus)


def _spark_type(dtype: str, rank: int) -> str:
    if dtype.startswith(("float", "double", "half", "bfloat")):
        base = "double"
    elif dtype.startswith(("int", "uint")):
        base = "bigint"
    elif dtype == "bool":
        base = "boolean"
    elif dtype == "string":
        base = "binary"
    else:
        raise ConfigError(f"a SavedModel output of type {dtype} has no Spark type: return numbers, booleans or strings")
    for _ in range(max(0, rank - 1)):
        base = f"array<{base}>"
    return base


def _arrow_type(spark_type: str) -> pa.DataType:
    if spark_type.startswith("array<"):
        return pa.list_(_arrow_type(spark_type[len("array<"):-1]))
    return {"double": pa.float64(), "bigint": pa.int64(), "boolean": pa.bool_(), "binary": pa.binary()}[spark_type]


@dataclass
class SavedModelPredictor:
    """The body of ``TFModel``'s ``mapInArrow`` (pickled into the tasks): ``args`` holds
    ``export_dir``, ``tag_set``, ``signature_def_key``, ``input_mapping``, ``output_mapping`` and
    ``batch_size``; ``tf_args`` is what :func:`single_node_env` prepares the process with."""

    args: Any
    tf_args: Any
    outputs: dict[str, str] | None = None  # output tensor -> Spark type, once output_schema read them

    @property
    def key(self) -> tuple:
        return self.args.export_dir, self.args.tag_set, self.args.signature_def_key or DEFAULT_SIGNATURE

    def signature(self) -> Any:
        """The signature's concrete function, loading the model on first use in this process."""
        if self.key not in _loaded:
            single_node_env(self.tf_args)
            import tensorflow as tf

            export_dir, tags, name = self.key
            model = tf.saved_model.load(export_dir, tags=tags.split(",") if tags else None)
            if name not in model.signatures:
                raise ConfigError(f"the SavedModel in {export_dir} has no signature {name!r}; it has "
                                  f"{sorted(model.signatures)} (setSignatureDefKey)")
            _loaded[self.key] = model
        return _loaded[self.key].signatures[self.key[2]]

    def describe(self, _batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """The signature's inputs and outputs (for :func:`output_schema`), as one record batch."""
        fn = self.signature()
        sides = (("input", fn.structured_input_signature[1]), ("output", fn.structured_outputs))
        rows = [{"side": side, "name": name, "dtype": spec.dtype.name,
                 "rank": spec.shape.rank if spec.shape.rank is not None else -1}
                for side, specs in sides for name, spec in specs.items()]
        yield pa.RecordBatch.from_pylist(rows, schema=pa.schema([("side", pa.string()), ("name", pa.string()),
                                                                 ("dtype", pa.string()), ("rank", pa.int32())]))

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import tensorflow as tf

        fn = self.signature()
        specs = fn.structured_input_signature[1]
        columns = sorted(self.args.input_mapping)
        outputs = sorted(self.args.output_mapping)
        schema = pa.schema([(self.args.output_mapping[t], _arrow_type(self.outputs[t])) for t in outputs])
        for batch in batches:
            for start in range(0, batch.num_rows, self.args.batch_size):
                part = batch.slice(start, self.args.batch_size)
                feed = {}
                for col in columns:
                    tensor = self.args.input_mapping[col]
                    feed[tensor] = _coerce(tf, column_to_numpy(part.column(col), col), specs[tensor])
                answers = fn(**feed)
                arrays = []
                for t, field in zip(outputs, schema, strict=True):
                    values = answers[t].numpy()
                    if len(values) != part.num_rows:
                        raise ConfigError(f"output {t!r} has {len(values)} rows for {part.num_rows} input rows: "
                                          "the signature must answer one row per input row")
                    arrays.append(pa.array(values.tolist(), type=field.type))
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _coerce(tf: Any, values: np.ndarray, spec: Any) -> Any:
    """``values`` as the signature's input ``spec`` wants them: its dtype, and its shape when the
    rows are flat (Spark arrays are one-dimensional, images are not)."""
    tensor = tf.constant(values, dtype=spec.dtype)
    dims = spec.shape.as_list()[1:] if spec.shape.rank else []
    if dims and None not in dims and list(tensor.shape[1:]) != dims:
        tensor = tf.reshape(tensor, [-1, *dims])
    return tensor


def output_schema(spark: Any, predictor: SavedModelPredictor) -> str:
    """The DDL schema of ``TFModel.transform``'s output, read from the SavedModel's signature in a
    one-task Spark job; the mappings are checked against it (``ConfigError`` names what exists)."""
    specs = spark.range(0, 1, 1, 1).mapInArrow(predictor.describe, SPEC_DDL).collect()
    inputs = {r["name"] for r in specs if r["side"] == "input"}
    outputs = {r["name"]: (r["dtype"], r["rank"]) for r in specs if r["side"] == "output"}
    args = predictor.args
    for tensor in args.input_mapping.values():
        if tensor not in inputs:
            raise ConfigError(f"input mapping names the tensor {tensor!r}, which the signature does not take; "
                              f"its inputs are {sorted(inputs)}")
    types = {}
    for tensor in sorted(args.output_mapping):
        if tensor not in outputs:
            raise ConfigError(f"output mapping names the tensor {tensor!r}, which the signature does not give; "
                              f"its outputs are {sorted(outputs)}")
        dtype, rank = outputs[tensor]
        if rank < 0:
            raise ConfigError(f"output {tensor!r} has no known rank, so its Spark type is unknown")
        types[tensor] = _spark_type(dtype, rank)
    predictor.outputs = types
    return ", ".join(f"`{args.output_mapping[t]}` {types[t]}" for t in sorted(args.output_mapping))

