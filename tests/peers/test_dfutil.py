"""``dfutil``: DataFrames to TFRecord files and back through TensorFlow's own writer and reader in
Spark tasks, with TensorFlowOnSpark's type mapping and schema inference from the first record."""

from __future__ import annotations

import os
from decimal import Decimal

import pytest
from pyspark.sql.types import ArrayType, BinaryType, DoubleType, LongType, StringType

from tfos_notebook import ConfigError, dfutil

pytestmark = pytest.mark.slow

SCHEMA = ("a string, b bigint, c array<bigint>, d double, e array<double>, f binary, g float, h int, i smallint, "
          "j tinyint, k boolean, l array<float>, m array<int>, n array<string>, o bigint")


def test_every_mapped_type_round_trips_and_loaded_dataframes_are_recognised(local_spark, tmp_path):
    row1 = ("text string", 1, [2, 3, 4, 5], -1.1, [-2.2, -3.3, -4.4, -5.5], bytearray(b"\xff\xfe\xfd\xfc"), 0.5, 7,
            -3, 9, True, [1.5, 2.5], [6, 7], ["x", "y"], None)
    row2 = ("second", 2, [1, 1], 2.0, [0.5, 0.25], bytearray(b"\x00"), 1.5, 8, 4, -1, False, [0.0, 1.0], [0, 0],
            ["p", "q"], 42)
    df1 = local_spark.createDataFrame([row1, row2], SCHEMA)
    out = str(tmp_path / "tfr")
    assert dfutil.saveAsTFRecords(df1, out) == 2
    assert sorted(os.listdir(out))[0].startswith("part-r-0000")

    df2 = dfutil.loadTFRecords(local_spark.sparkContext, out, binary_features=["f"])
    types = {f.name: f.dataType for f in df2.schema.fields}
    assert df2.columns == sorted(df1.columns)
    assert types["a"] == StringType() and types["b"] == LongType() and types["c"] == ArrayType(LongType())
    assert types["d"] == DoubleType() and types["f"] == BinaryType() and types["k"] == LongType()
    assert types["n"] == ArrayType(StringType()) and types["o"] == LongType()  # null (an empty list) in the first
    loaded = {r.a: r for r in df2.collect()}
    first = loaded["text string"]
    assert (first.b, first.c, first.h, first.i, first.j, first.k, first.m, first.n) == (
        1, [2, 3, 4, 5], 7, -3, 9, 1, [6, 7], ["x", "y"])
    assert first.d == pytest.approx(-1.1, abs=1e-6) and first.e == pytest.approx([-2.2, -3.3, -4.4, -5.5], abs=1e-6)
    assert first.g == 0.5 and first.l == [1.5, 2.5] and first.o is None
    assert bytes(first.f) == b"\xff\xfe\xfd\xfc"
    assert loaded["second"].k == 0 and loaded["second"].o == 42

    assert not dfutil.isLoadedDF(df1)
    assert dfutil.isLoadedDF(df2)
    df_ref = df2
    assert dfutil.isLoadedDF(df_ref)
    df3 = df2.filter(df2.a == "string_label")
    assert not dfutil.isLoadedDF(df3)


def test_bad_columns_existing_output_and_empty_input_are_refused(local_spark, tmp_path):
    df = local_spark.createDataFrame([(1, Decimal("2.50"))], "x int, y decimal(5,2)")
    with pytest.raises(ConfigError, match="column 'y' is decimal\\(5,2\\), which a tf.train.Example cannot hold: "
                                          "cast it in Spark"):
        dfutil.saveAsTFRecords(df, str(tmp_path / "bad"))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "part-r-00000").write_bytes(b"x")
    with pytest.raises(ConfigError, match="full already exists and holds files: remove it or save to another"):
        dfutil.saveAsTFRecords(df.select("x"), str(tmp_path / "full"))
    with pytest.raises(ConfigError, match="nowhere is not a directory TensorFlow can read"):
        dfutil.loadTFRecords(local_spark.sparkContext, str(tmp_path / "nowhere"))
