"""Arrow conversions at both ends of the feed (no Spark needed)."""

from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import Row

from tfos_notebook.runtime.driver.errors import FeedError
from tfos_notebook.runtime.wire.feed.codec import (
    batch_bytes,
    batch_to_rows,
    batches_of_rows,
    column_to_numpy,
    python_column,
    read_stream,
    row_kind,
    rows_to_batch,
    schema_for_sample,
    slices,
)
from tfos_notebook.runtime.wire.feed.predictions import result_values, results_to_batch


def test_rdd_rows_keep_their_kind_through_arrow():
    for rows in ([(1, "a"), (2, "b")], [Row(x=1, y="a"), Row(x=2, y="b")], [{"x": 1, "y": "a"}, {"x": 2, "y": "b"}],
                 [1.5, 2.5]):
        schema = schema_for_sample(rows[0])
        back = batch_to_rows(rows_to_batch(rows, schema))
        assert back == rows
        assert type(back[0]) is type(rows[0])


def test_numpy_rows_become_nested_lists_and_then_dimensions():
    images = [np.full((3, 4), i, dtype=np.float32) for i in range(5)]
    schema = schema_for_sample((images[0], 0))
    assert schema.field("_1").type == pa.list_(pa.list_(pa.float32()))
    batch = rows_to_batch([(img, i) for i, img in enumerate(images)], schema)
    arr = column_to_numpy(batch.column(0), "_1")
    assert arr.shape == (5, 3, 4) and arr.dtype == np.float32
    assert (arr[4] == 4).all()


def test_numpy_values_of_an_rdd_come_back_to_datafeed_as_numpy_arrays():
    rows = [(np.arange(4, dtype=np.float32) + i, i) for i in range(3)]
    back = batch_to_rows(rows_to_batch(rows, schema_for_sample(rows[0])))
    assert isinstance(back[2][0], np.ndarray) and back[2][0].dtype == np.float32
    assert back[2][0].tolist() == [2.0, 3.0, 4.0, 5.0] and back[2][1] == 2


def test_a_row_whose_type_differs_from_the_first_is_refused_with_the_column_named():
    schema = schema_for_sample((1, [1.0, 2.0]))
    with pytest.raises(FeedError, match="column '_2' does not match the first row's type"):
        rows_to_batch([(1, [1.0, 2.0]), (2, "oops")], schema)


def test_a_first_row_with_none_cannot_give_a_type():
    with pytest.raises(FeedError, match="column '_2' is None in the first row"):
        schema_for_sample((1, None))


def test_ragged_arrays_and_nulls_are_explained():
    ragged = pa.array([[1.0, 2.0], [3.0]])
    with pytest.raises(FeedError, match="arrays of different lengths"):
        column_to_numpy(ragged, "x")
    with pytest.raises(FeedError, match="null values"):
        column_to_numpy(pa.array([1.0, None]), "y")
    with pytest.raises(FeedError, match="no TensorFlow counterpart"):
        column_to_numpy(pa.array([pa.scalar(1, pa.date32()).as_py()]), "d")


def test_strings_and_binary_become_object_arrays():
    assert column_to_numpy(pa.array(["a", "bc"]), "s").tolist() == ["a", "bc"]
    assert column_to_numpy(pa.array([b"\x00", b"\x01\x02"]), "b").tolist() == [b"\x00", b"\x01\x02"]


def test_sliced_list_columns_convert_only_their_rows():
    batch = pa.record_batch([pa.array([[i, i] for i in range(10)])], names=["v"])
    assert column_to_numpy(batch.slice(7, 2).column(0), "v").tolist() == [[7, 7], [8, 8]]


@pytest.mark.parametrize("column", [
    pa.array([[1.5, 2.0], [3.0, 4.25]], pa.list_(pa.float64())),
    pa.array([[1.1, 2.2], [3.3, 4.4]], pa.list_(pa.float32())),
    pa.array([[1, 2], [3, 4]], pa.list_(pa.int64())),
    pa.array([[True, False], [False, True]], pa.list_(pa.bool_())),
    pa.array([["a", "b"], ["c", "d"]], pa.list_(pa.string())),
    pa.array([[b"a", b"b"], [b"c", b"d"]], pa.list_(pa.binary())),
    pa.array([[[1.0, 2.0]], [[3.0, 4.0]]], pa.list_(pa.list_(pa.float64()))),
    pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float64(), 2)),
    pa.array([[1.0, 2.0]], pa.large_list(pa.float64())),
    pa.array([[], []], pa.list_(pa.float64())),
    pa.array([[1.0], [2.0, 3.0]], pa.list_(pa.float64())),  # ragged
    pa.array([[1.0, None], None], pa.list_(pa.float64())),  # nulls
    pa.array([[datetime.date(2020, 1, 1)]], pa.list_(pa.date32())),
    pa.array([[{"a": 1}]], pa.list_(pa.struct([("a", pa.int64())]))),
], ids=str)
def test_list_columns_become_the_same_python_values_as_arrows_own(column):
    def types(value):
        return [types(v) for v in value] if isinstance(value, list) else type(value)

    got, want = python_column(column, pa.field("x", column.type)), column.to_pylist()
    assert got == want and types(got) == types(want)


def test_record_batches_travel_as_one_ipc_stream_each():
    batch = pa.record_batch([pa.array(np.arange(1000)), pa.array(["x"] * 1000)], names=["a", "b"])
    pieces = list(slices(batch, 2000))
    assert len(pieces) > 1 and sum(p.num_rows for p in pieces) == 1000
    schema, back = read_stream(batch_bytes(pieces[1]).to_pybytes())
    assert back.equals(pieces[1]) and schema.names == ["a", "b"]


def test_rows_are_grouped_into_batches_of_about_the_frame_size():
    schema = schema_for_sample((0, np.zeros(1000, np.float32)))
    rows = ((i, np.zeros(1000, np.float32)) for i in range(3000))
    batches = list(batches_of_rows(rows, schema, max_bytes=400_000))
    assert sum(b.num_rows for b in batches) == 3000
    assert max(b.nbytes for b in batches[1:]) < 600_000


def test_results_come_back_as_one_column_per_output_and_must_match_the_rows():
    assert results_to_batch(np.arange(3), 3).schema.names == ["prediction"]
    probs = results_to_batch({"label": [1, 2], "probs": np.ones((2, 10), np.float32)}, 2)
    assert probs.schema.names == ["label", "probs"]
    assert probs.column(1).type == pa.list_(pa.float32())
    with pytest.raises(FeedError, match="got 2 results for a batch of 3 rows"):
        results_to_batch([1, 2], 3)


def test_a_dataframe_schema_reads_back_as_rows():
    assert row_kind(pa.schema([("a", pa.int64())])) == "row"


def _over_the_wire(results):
    _, batch = read_stream(batch_bytes(results_to_batch(results)).to_pybytes())
    return result_values(batch)


def test_results_come_back_as_the_objects_the_node_gave():
    squares = _over_the_wire(np.square(np.arange(4, dtype=np.int32).reshape(4, 1)))
    assert [type(v) for v in squares] == [np.ndarray] * 4 and squares[3].dtype == np.int32
    assert squares[3].tolist() == [9] and sum(squares).tolist() == [14]
    scalars = _over_the_wire(np.arange(3, dtype=np.float32))
    assert [type(v) for v in scalars] == [np.float32] * 3
    assert _over_the_wire([(1, "a"), (2, "b")]) == [(1, "a"), (2, "b")]
    pairs = _over_the_wire([(np.float64(0.5), np.ones(2, np.int8)), (np.float64(1.5), np.zeros(2, np.int8))])
    assert type(pairs[1][0]) is np.float64 and pairs[1][1].dtype == np.int8 and pairs[1][1].tolist() == [0, 0]
    assert _over_the_wire([1, 2.5, None]) == [1, 2.5, None] and _over_the_wire([[1, 2], [3]]) == [[1, 2], [3]]
    ragged = _over_the_wire([np.arange(2, dtype=np.float32), np.arange(3, dtype=np.float32)])
    assert [v.tolist() for v in ragged] == [[0, 1], [0, 1, 2]] and ragged[1].dtype == np.float32
    assert _over_the_wire({"a": [1, 2], "b": ["x", "y"]}) == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]


def test_numpy_scalars_of_an_rdd_come_back_to_datafeed_as_numpy_scalars():
    rows = [(np.float32(i), i) for i in range(3)]
    back = batch_to_rows(rows_to_batch(rows, schema_for_sample(rows[0])))
    assert type(back[2][0]) is np.float32 and back == rows


def test_numbers_become_numpy_straight_from_the_arrow_buffer_as_pyarrow_would_make_them():
    from tfos_notebook.runtime.wire.feed.buffers import array_to_numpy, numpy_dtype

    for typ in (pa.int8(), pa.uint16(), pa.int32(), pa.int64(), pa.float16(), pa.float32(), pa.float64()):
        whole = pa.array(np.arange(10).astype(numpy_dtype(typ)), type=typ)
        for arr in (whole, whole.slice(3, 5), whole.slice(10)):
            expected = arr.to_numpy(zero_copy_only=False)
            got = array_to_numpy(arr)
            assert got.dtype == expected.dtype and got.tolist() == expected.tolist(), typ
    with_null = array_to_numpy(pa.array([1.0, None]))  # pyarrow's own conversion: NaN for the null
    assert with_null[0] == 1.0 and np.isnan(with_null[1])
    nested = pa.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]], [[9, 10], [11, 12]]]).slice(1)
    assert column_to_numpy(nested, "x").tolist() == [[[5, 6], [7, 8]], [[9, 10], [11, 12]]]


def test_a_node_turns_fed_numbers_into_rows_without_importing_pandas(tmp_path):
    """pyarrow's own to_numpy imports pandas: 0.2-0.4 s of a node's process before its first batch."""
    import subprocess
    import sys

    rows = [(np.arange(784, dtype=np.float32), i) for i in range(300)]
    frame = tmp_path / "frame.arrows"
    frame.write_bytes(batch_bytes(rows_to_batch(rows, schema_for_sample(rows[0]))).to_pybytes())
    lists = tmp_path / "lists.arrows"
    listed = [(r[0].tolist(), r[1]) for r in rows]
    lists.write_bytes(batch_bytes(rows_to_batch(listed, schema_for_sample(listed[0]))).to_pybytes())
    code = f"""
import sys
import pyarrow as pa
from tfos_notebook.runtime.wire.feed.codec import batch_to_rows, read_stream
for path in ({str(frame)!r}, {str(lists)!r}):
    _, batch = read_stream(open(path, "rb").read())
    rows = batch_to_rows(batch.slice(7, 128))
    assert len(rows) == 128 and rows[0][1] == 7 and list(rows[0][0])[:3] == [0.0, 1.0, 2.0]
print("pandas" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_numbers_built_on_their_buffers_equal_pyarrows_own():
    """numbers_array / values_array / binary_array build what pa.array would: on a buffer what they
    take whole, and whatever they do not (another dtype, a None, a bool, an int out of range) through
    pa.array itself, with its result or its error."""
    from tfos_notebook.runtime.wire.feed.buffers import binary_array, numbers_array, values_array

    def same_as_pyarrow(build, values, typ):
        try:
            want = pa.array(values, type=typ)
        except (pa.ArrowException, OverflowError, TypeError, ValueError) as e:
            with pytest.raises(type(e)):
                build(values, typ)
            return
        assert build(values, typ).equals(want), (values, typ)

    for typ in (pa.int8(), pa.int32(), pa.int64(), pa.uint16(), pa.float32(), pa.float64()):
        values = np.arange(-3, 5).astype(np.dtype(typ.to_pandas_dtype()) if typ != pa.uint16() else np.uint16)
        same_as_pyarrow(numbers_array, values[::2], typ)  # a strided view: copied contiguous
    for values, typ in ((np.arange(3, dtype=np.int32), pa.int64()), (np.arange(3, dtype=">f8"), pa.float64()),
                        (np.zeros(3, bool), pa.bool_())):
        same_as_pyarrow(numbers_array, values, typ)
    for values, typ in (([1, -2, 2**63 - 1], pa.int64()), ([0.5, 2.0], pa.float64()), ([], pa.int64()),
                        ([7, -7], pa.int32()), ([1, None], pa.int64()), ([True, 2], pa.int64()),
                        ([2**63], pa.int64()), ([2**31], pa.int32()), ([-1], pa.uint32()), ([1, 2.0], pa.int64()),
                        ([1.0, 2], pa.float64()), (["a"], pa.string()), ([np.int64(1)], pa.int64())):
        same_as_pyarrow(values_array, values, typ)
    assert np.isnan(values_array([float("nan")], pa.float64()).to_pylist()[0])
    assert rows_to_batch([(1, 0.5), (2, 1.5)], schema_for_sample((1, 0.5))).column(0).type == pa.int64()
    for values in ([], [b""], [b"a", b"", b"\x00bc" * 1000]):
        assert binary_array(values).equals(pa.array(values, pa.binary()))


class _Marks:
    """Unpickled, it would write a file: proof that a frame's pickle ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_frame_with_a_pickled_arrow_extension_column_is_refused_unread(tmp_path):
    """An Arrow IPC frame whose column claims pyarrow's pickled extension type (``arrow.py_extension_type``,
    CVE-2023-47248: pyarrow before 14.0.1 unpickles its metadata) is refused by the feed's reader on
    every pyarrow the package admits, and its pickle never runs (pyarrow-hotfix is loaded with the
    feed's codec: without it, pyarrow 8 of Databricks 14.3 runs the pickle here)."""
    import pickle

    from tfos_notebook.runtime.wire.feed.codec import read_stream

    marker = tmp_path / "unpickled"
    field = pa.field("x", pa.int64(), metadata={b"ARROW:extension:name": b"arrow.py_extension_type",
                                               b"ARROW:extension:metadata": pickle.dumps(_Marks(str(marker)))})
    batch = pa.RecordBatch.from_arrays([pa.array([1, 2, 3])], schema=pa.schema([field]))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    try:
        _, read = read_stream(sink.getvalue().to_pybytes())
    except Exception as e:  # pyarrow before 14.0.1, with the hotfix
        assert "Disallowed deserialization of 'arrow.py_extension_type'" in str(e)
    else:  # pyarrow 14.0.1 and later: an extension type it does not load is read as its storage
        assert read.column(0).type == pa.int64()
    assert not marker.exists()
