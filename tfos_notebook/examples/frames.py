"""Arrow tables into Spark DataFrames for the examples, on every Spark the package supports."""

from __future__ import annotations


def list_column(matrix, dtype: str):
    """The rows of a 2-D array as an Arrow column of lists (Spark's ``array<...>``), built on the
    array's buffer (pyarrow 8, Databricks 14.3's, cannot cast a fixed-size list to a list)."""
    import numpy as np
    import pyarrow as pa

    flat = pa.array(np.ascontiguousarray(matrix, dtype=dtype).ravel())
    offsets = pa.array(np.arange(0, len(flat) + 1, matrix.shape[1], dtype="int32"))
    return pa.ListArray.from_arrays(offsets, flat)


def arrow_frame(spark, table):
    """The Arrow ``table`` as a DataFrame, moved through Arrow (60,000 MNIST rows take about a
    second): Spark 4 takes the table itself; Spark 3.5 takes a pandas frame, through Arrow when
    Arrow is on for pandas (Databricks turns it on; plain Spark 3.5 does not, and would convert row
    by row), so it is on for this call."""
    if int(spark.version.split(".")[0]) >= 4:
        return spark.createDataFrame(table)
    from pyspark.sql.pandas.types import from_arrow_schema

    key = "spark.sql.execution.arrow.pyspark.enabled"
    before = spark.conf.get(key, "false")
    spark.conf.set(key, "true")
    try:
        return spark.createDataFrame(table.to_pandas(), from_arrow_schema(table.schema))
    finally:
        spark.conf.set(key, before)
