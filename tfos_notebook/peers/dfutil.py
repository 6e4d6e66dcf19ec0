"""DataFrames to and from TFRecord files of ``tf.train.Example`` with TensorFlowOnSpark's names
(``tensorflowonspark.dfutil``), written and read by Spark tasks with TensorFlow's own TFRecord
writer and reader: no Hadoop jar.

    dfutil.saveAsTFRecords(df, "/data/mnist/tfr")            # part-r-00000, part-r-00001...
    df = dfutil.loadTFRecords(sc, "/data/mnist/tfr", binary_features=["image_png"])

Types, as TensorFlowOnSpark maps them: float and double -> FloatList; boolean and the integer
types -> Int64List; string and binary -> BytesList; arrays of those -> the same lists (arrays of
strings and binaries too). A null becomes an empty list, which loads back as null. Loading infers
the schema from the first record: Int64List -> long, FloatList -> double, BytesList -> string (or
binary for ``binary_features``), a list of more than one value -> an array of that type; an empty
list keeps its list's type (TensorFlowOnSpark made it a string), a feature with no list at all is
a string. So a one-element array loads back as a scalar, and floats come back with float32
precision. Paths are what TensorFlow's filesystem layer opens (local paths, ``file://``, and
``gs://`` / ``hdfs://`` / ``s3://`` where TensorFlow's plugins for them are installed).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import ConfigError
from ..runtime.driver.spark import backend_for

__all__ = ["fromTFExample", "infer_schema", "isLoadedDF", "loadTFRecords", "loadedDF", "saveAsTFRecords",
           "toTFExample"]

FLOAT_TYPES = ("float", "double")
INT_TYPES = ("boolean", "tinyint", "smallint", "int", "bigint", "long")
BYTES_TYPES = ("string", "binary")
PART = "part-r-{:05d}"

# The directory each DataFrame made by loadTFRecords was read from; weak, so that a DataFrame no
# longer used by the program is not kept alive here.
loadedDF: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def isLoadedDF(df: Any) -> bool:  # noqa: N802  (TensorFlowOnSpark's name)
    """Whether ``df`` itself (not one derived from it) was made by :func:`loadTFRecords`."""
    return df in loadedDF


def _feature(tf: Any, name: str, dtype: str, value: Any) -> Any:
    element = dtype[len("array<"):-1] if dtype.startswith("array<") else dtype
    values = [] if value is None else value if dtype.startswith("array<") else [value]
    if element in FLOAT_TYPES:
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    if element in INT_TYPES:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]
                                                            if isinstance(values, list) else values))
    if element == "binary":
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[bytes(v) for v in values]))
    if element == "string":
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[str(v).encode("utf-8") for v in values]))
    raise ConfigError(f"column {name!r} is {dtype}, which a tf.train.Example cannot hold: cast it in Spark to "
                      "a number, a string, binary, or an array of numbers or strings")


def check_dtypes(dtypes: list[tuple[str, str]]) -> None:
    """Refuse, before any task runs, a column type that a ``tf.train.Example`` cannot hold."""
    known = (*FLOAT_TYPES, *INT_TYPES, *BYTES_TYPES)
    for name, dtype in dtypes:
        element = dtype[len("array<"):-1] if dtype.startswith("array<") else dtype
        if element not in known:
            _feature(None, name, dtype, None)


class toTFExample:  # noqa: N801  (TensorFlowOnSpark's name: toTFExample(dtypes) gives the function)
    """The ``mapPartitions`` function that turns rows of a DataFrame with ``dtypes``
    (``df.dtypes``) into ``(serialized tf.train.Example, None)`` pairs."""

    def __init__(self, dtypes: list[tuple[str, str]]) -> None:
        check_dtypes(dtypes)
        self.dtypes = list(dtypes)

    def __call__(self, rows: Iterable) -> Iterator[tuple[bytearray, None]]:
        import tensorflow as tf

        for row in rows:
            features = {name: _feature(tf, name, dtype, row[name]) for name, dtype in self.dtypes}
            example = tf.train.Example(features=tf.train.Features(feature=features))
            yield bytearray(example.SerializeToString()), None


def _column(array: Any, dtype: str) -> list:
    """One Arrow column of a batch as the per-row values ``_feature`` takes: numeric arrays as numpy
    slices of the column's one flat buffer (no Python number per element), the rest as Python values."""
    element = dtype[len("array<"):-1] if dtype.startswith("array<") else dtype
    if not dtype.startswith("array<") or element in BYTES_TYPES:
        return array.to_pylist()
    import numpy as np

    flat = array.values.to_numpy(zero_copy_only=False).astype(np.float64 if element in FLOAT_TYPES else np.int64)
    offsets = array.offsets.to_numpy()
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    return [flat[offsets[i]:offsets[i + 1]] if valid[i] else None for i in range(len(array))]


class _WritePartition:
    """Writes one partition's examples to ``<output_dir>/part-r-<partition>`` with TensorFlow's
    writer: the ``mapInArrow`` function of :func:`saveAsTFRecords` (Arrow batches in, no pickled
    rows), yielding the count it wrote."""

    def __init__(self, output_dir: str, dtypes: list[tuple[str, str]]) -> None:
        check_dtypes(dtypes)
        self.output_dir, self.dtypes = output_dir.rstrip("/"), list(dtypes)

    def __call__(self, batches: Iterable) -> Iterator[Any]:
        import pyarrow as pa
        import tensorflow as tf
        from pyspark import TaskContext

        tf.io.gfile.makedirs(self.output_dir)
        count = 0
        with tf.io.TFRecordWriter(f"{self.output_dir}/{PART.format(TaskContext.get().partitionId())}") as writer:
            for batch in batches:
                columns = [_column(batch.column(i), dtype) for i, (_, dtype) in enumerate(self.dtypes)]
                for values in zip(*columns, strict=True):
                    features = {name: _feature(tf, name, dtype, value)
                                for (name, dtype), value in zip(self.dtypes, values, strict=True)}
                    writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
                count += batch.num_rows
        yield pa.RecordBatch.from_pydict({"records": [count]}, schema=pa.schema([("records", pa.int64())]))


def saveAsTFRecords(df: Any, output_dir: str) -> int:  # noqa: N802
    """Save ``df`` as TFRecord files of ``tf.train.Example`` in ``output_dir``, one
    ``part-r-NNNNN`` file per partition, written by the Spark tasks. Returns the records written
    (TensorFlowOnSpark returned None).

    Raises:
        ConfigError: ``output_dir`` already holds files (remove it or pick another), or a column
            has a type an Example cannot hold (cast it first).
    """
    check_dtypes(df.dtypes)
    if backend_for(df.sparkSession).hadoop_fs(output_dir).list_sizes():
        raise ConfigError(f"{output_dir} already exists and holds files: remove it or save to another directory")
    written = df.mapInArrow(_WritePartition(output_dir, df.dtypes), "records long").collect()
    return sum(row.records for row in written)


def infer_schema(example: Any, binary_features: list[str] | None = None) -> Any:
    """The Spark schema (a ``StructType``, columns sorted by name) of a ``tf.train.Example``;
    ``binary_features`` names the bytes features that are binary rather than UTF-8 strings."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    binary = set(binary_features or ())
    fields = []
    for name, feature in sorted(example.features.feature.items()):
        kind = feature.WhichOneof("kind")
        values = getattr(feature, kind).value if kind else []
        base = (BinaryType() if name in binary else LongType() if kind == "int64_list"
                else DoubleType() if kind == "float_list" else StringType())
        fields.append(StructField(name, ArrayType(base) if len(values) > 1 else base, True))
    return StructType(fields)


def _value(name: str, feature: Any, binary: set[str]) -> Any:
    kind = feature.WhichOneof("kind")
    values = list(getattr(feature, kind).value) if kind else []
    if kind == "bytes_list":
        values = [bytearray(v) if name in binary else v.decode("utf-8") for v in values]
    if not values:
        return None
    return values if len(values) > 1 else values[0]


def fromTFExample(records: Iterable, binary_features: list[str] | None = None) -> list:  # noqa: N802
    """The ``mapPartitions`` function that turns ``(serialized tf.train.Example, ...)`` records
    into pyspark Rows, one field per feature (sorted by name): lists of more than one value as
    lists, one value as that value, an empty list as None, bytes as str unless named in
    ``binary_features`` (then bytearray)."""
    import tensorflow as tf
    from pyspark.sql import Row

    binary = set(binary_features or ())
    rows = []
    for record in records:
        example = tf.train.Example.FromString(bytes(record[0]))
        rows.append(Row(**{name: _value(name, feature, binary)
                           for name, feature in sorted(example.features.feature.items())}))
    return rows


class _Probe:
    """The one-task job of :func:`loadTFRecords`: the record files in a directory (hidden files
    and Hadoop's ``_SUCCESS`` markers left out) and the schema of its first record."""

    def __init__(self, input_dir: str, binary_features: list[str]) -> None:
        self.input_dir, self.binary_features = input_dir.rstrip("/"), binary_features

    def __call__(self, _: Iterable) -> Iterator[tuple[list[str], Any]]:
        import tensorflow as tf

        if not tf.io.gfile.isdir(self.input_dir):
            yield [], None
            return
        files = [f"{self.input_dir}/{name}" for name in sorted(tf.io.gfile.listdir(self.input_dir))
                 if not name.startswith(("_", "."))]
        for record in tf.data.TFRecordDataset(files).take(1).as_numpy_iterator():
            yield files, infer_schema(tf.train.Example.FromString(record), self.binary_features)
            return
        yield files, None


class _ReadFile:
    """Reads the records of one TFRecord file into tuples of the schema's columns ``names`` (None
    for a feature a record lacks): the ``flatMap`` of :func:`loadTFRecords`."""

    def __init__(self, binary_features: list[str], names: list[str]) -> None:
        self.binary_features, self.names = binary_features, names

    def __call__(self, path: str) -> list[tuple]:
        import tensorflow as tf

        records = ((r, None) for r in tf.data.TFRecordDataset(path).as_numpy_iterator())
        return [tuple(row.asDict().get(n) for n in self.names) for row in fromTFExample(records, self.binary_features)]


def loadTFRecords(sc: Any, input_dir: str, binary_features: list[str] | None = None) -> Any:  # noqa: N802
    """A DataFrame of the ``tf.train.Example`` records in the TFRecord files of ``input_dir``,
    one partition per file, read by the Spark tasks. The schema comes from the first record (see
    :func:`infer_schema`); ``binary_features`` names bytes features to load as binary.

    Raises:
        ConfigError: ``input_dir`` is not a directory, or holds no record.
    """
    binary = list(binary_features or ())
    files, schema = sc.parallelize([0], 1).mapPartitions(_Probe(input_dir, binary)).collect()[0]
    if schema is None:
        what = "holds no TFRecord" if files else "is not a directory TensorFlow can read"
        raise ConfigError(f"{input_dir} {what}: give the directory saveAsTFRecords (or a TFRecord writer) wrote")
    from pyspark.sql import SparkSession

    rows = sc.parallelize(files, len(files)).flatMap(_ReadFile(binary, schema.names))
    df = SparkSession.builder.getOrCreate().createDataFrame(rows, schema)
    loadedDF[df] = input_dir
    return df
