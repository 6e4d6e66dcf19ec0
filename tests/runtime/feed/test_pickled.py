"""PySpark's pickled batches read straight into Arrow columns (``wire/feed/pickled.py``): for every
shape it reads, the same record batches as unpickling the rows and converting them; for anything
else, the batch is unpickled. Batches are pickled by PySpark's own serializers, as its RDDs hold
them; no Spark application is needed."""

from __future__ import annotations

import math
import random

import numpy as np
import pyarrow as pa
import pytest
from pyspark.serializers import CloudPickleSerializer, PickleSerializer

from tfos_notebook.runtime.wire.feed.codec import batches_of_rows, schema_for_sample
from tfos_notebook.runtime.wire.feed.pickled import Decoder, dealt_batches

SERIALIZERS = [CloudPickleSerializer(), PickleSerializer()]
SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308]
INTS = [0, 1, 255, 256, 65535, 65536, -1, -256, 2**31 - 1, -(2**31), 2**31, 2**40, 2**63 - 1, -(2**63)]


def floats(rng: random.Random, n: int) -> list[float]:
    return [rng.choice(SPECIAL) if rng.random() < 0.05 else rng.uniform(-1e6, 1e6) for _ in range(n)]


def slow(records: list[bytes], serializer, schema: pa.Schema) -> pa.Table:
    rows = [row for r in records for row in serializer.loads(r)]
    return pa.Table.from_batches(list(batches_of_rows(iter(rows), schema, 1 << 30)), schema=schema)


def fast(records: list[bytes], serializer, schema: pa.Schema, max_bytes: int = 1 << 30) -> pa.Table:
    return pa.Table.from_batches(list(dealt_batches(records, serializer, schema, max_bytes)), schema=schema)


def assert_same(records: list[bytes], serializer, schema: pa.Schema) -> None:
    want, got = slow(records, serializer, schema), fast(records, serializer, schema)
    assert got.schema == want.schema
    assert got.num_rows == want.num_rows
    # equal including NaN and the sign of zero: compare the bits of the floats
    for a, b in zip(got.columns, want.columns, strict=True):
        a, b = a.combine_chunks(), b.combine_chunks()
        if pa.types.is_list(a.type):
            assert a.offsets.equals(b.offsets)
            a, b = a.flatten(), b.flatten()
        an, bn = a.to_numpy(zero_copy_only=False), b.to_numpy(zero_copy_only=False)
        assert an.dtype == bn.dtype
        assert an.tobytes() == bn.tobytes()


@pytest.mark.parametrize("serializer", SERIALIZERS, ids=["cloudpickle", "pickle"])
def test_rows_of_float_lists_decode_exactly_as_unpickled(serializer):
    rng = random.Random(1)
    for lengths in ([784] * 40, [0, 1, 2, 999, 1000, 1001, 2000, 2001, 3], [1] * 1001, [5] * 2500):
        rows = [floats(rng, n) for n in lengths]
        schema = schema_for_sample(rows[0] or [0.0])
        records = [serializer.dumps(rows[i:i + 37]) for i in range(0, len(rows), 37)] + [serializer.dumps(rows)]
        assert Decoder.of(schema) is not None
        assert all(Decoder.of(schema).decode(r) is not None for r in records)
        assert_same(records, serializer, schema)


@pytest.mark.parametrize("serializer", SERIALIZERS, ids=["cloudpickle", "pickle"])
def test_tuples_of_lists_floats_and_ints_decode_exactly_as_unpickled(serializer):
    rng = random.Random(2)
    shapes = [
        lambda i: (floats(rng, 784), rng.choice(INTS)),                     # TensorFlowOnSpark's (image, label)
        lambda i: (floats(rng, 3),),
        lambda i: (rng.choice(INTS), floats(rng, 1)[0], floats(rng, 10)),
        lambda i: (floats(rng, 4), floats(rng, 1)[0], rng.choice(INTS), floats(rng, 1200)),  # MARK ... TUPLE
    ]
    for make in shapes:
        rows = [make(i) for i in range(300)]
        schema = schema_for_sample(rows[0])
        records = [serializer.dumps(rows[i:i + 50]) for i in range(0, len(rows), 50)] + [serializer.dumps(rows[:1])]
        assert all(Decoder.of(schema).decode(r) is not None for r in records), schema
        assert_same(records, serializer, schema)


def test_scalar_rows_and_small_batches_decode():
    s = CloudPickleSerializer()
    for rows in ([1.5, -0.0, math.nan], [3, 2**40, -7], [2.0]):
        schema = schema_for_sample(rows[0])
        assert_same([s.dumps(rows)], s, schema)
        assert Decoder.of(schema).decode(s.dumps(rows)) is not None


def test_what_it_does_not_read_is_unpickled_in_order_with_the_same_result():
    s = CloudPickleSerializer()
    rng = random.Random(3)
    image = floats(rng, 16)
    schema = schema_for_sample((image, 1))
    shared = floats(rng, 16)
    odd_batches = [
        [(floats(rng, 15) + [7], 1)],                 # an int among the floats: Arrow makes it 7.0
        [(shared, 1), (shared, 2)],                   # the same list twice: pickled by reference
        [(floats(rng, 16), 3.0)],                     # a float where the first row had an int: 3
        [(floats(rng, 16), 3.5)],                     # ... or 3.5: Arrow truncates it either way
        [(floats(rng, 16), "x")],                     # a string: refused, as when unpickled
    ]
    good = [s.dumps([(floats(rng, 16), i) for i in range(20)]) for _ in range(3)]
    decoder = Decoder.of(schema)
    for odd in odd_batches[:4]:
        record = s.dumps(odd)
        assert decoder.decode(record) is None
        assert_same([good[0], record, good[1], good[2]], s, schema)
    for feed in (slow, fast):
        with pytest.raises(Exception, match="does not match the first row's type"):
            feed([good[0], s.dumps(odd_batches[4])], s, schema)


def test_shapes_it_does_not_read_are_left_to_pickle():
    for sample in ({"a": [1.0]}, ["x"], (np.zeros(3),), np.float64(1.0), [[1.0]], [[1]], (True,), [True]):
        assert Decoder.of(schema_for_sample(sample)) is None, sample
    s = CloudPickleSerializer()
    rows = [{"a": [1.0, 2.0]}, {"a": [3.0]}]
    schema = schema_for_sample(rows[0])
    assert fast([s.dumps(rows)], s, schema).to_pylist() == [{"a": [1.0, 2.0]}, {"a": [3.0]}]


def test_batches_keep_to_the_size_asked_and_the_rows_in_order():
    s = CloudPickleSerializer()
    rows = [([float(i)] * 100, i) for i in range(1000)]
    schema = schema_for_sample(rows[0])
    batches = list(dealt_batches([s.dumps(rows[i:i + 10]) for i in range(0, 1000, 10)], s, schema, 80_000))
    assert 10 <= len(batches) <= 12
    assert [r["_2"] for b in batches for r in b.to_pylist()] == list(range(1000))


@pytest.mark.parametrize("serializer", SERIALIZERS, ids=["cloudpickle", "pickle"])
def test_rows_of_small_int_lists_decode_and_larger_ints_are_unpickled(serializer):
    """TensorFlowOnSpark's mnist_spark.py parses its CSV into (784 ints, label): pixels 0-255 are
    read straight; a list holding an int beyond 255, or below 0, is unpickled, with the same result."""
    rng = random.Random(4)
    rows = [([rng.randrange(256) for _ in range(784)], rng.randrange(10)) for _ in range(200)]
    rows += [([rng.randrange(256) for _ in range(n)], 3) for n in (0, 1, 999, 1000, 1001, 2001)]
    schema = schema_for_sample(rows[0])
    records = [serializer.dumps(rows[i:i + 30]) for i in range(0, len(rows), 30)]
    assert all(Decoder.of(schema).decode(r) is not None for r in records)
    assert_same(records, serializer, schema)
    for odd in ([256, 1, 2], [-1, 2], [2**40], [1, 2.0]):
        record = serializer.dumps([(odd, 1)])
        assert Decoder.of(schema).decode(record) is None, odd
        assert_same(records[:1] + [record] + records[1:2], serializer, schema)


def test_a_node_task_turns_rows_into_arrow_without_importing_pandas(tmp_path):
    """pyarrow's pa.array imports pandas: 0.2-0.4 s of a fresh Python worker's CPU before the
    node's first batch, while its child starts on the same cores. Rows of float lists (read from
    their pickles) and of numpy arrays (through rows_to_batch) become Arrow without it, and so
    does a DataFrame node task's summary."""
    import pickle
    import subprocess
    import sys

    serializer = PickleSerializer()
    lists = [([float(i)] * 784, i) for i in range(300)]
    (tmp_path / "lists").write_bytes(pickle.dumps([serializer.dumps(lists[i:i + 100]) for i in range(0, 300, 100)]))
    code = f"""
import pickle, sys
import numpy as np
from pyspark.serializers import PickleSerializer
from tfos_notebook.runtime.wire.feed.codec import batches_of_rows, schema_for_sample
from tfos_notebook.runtime.wire.feed.pickled import dealt_batches
records = pickle.loads(open({str(tmp_path / "lists")!r}, "rb").read())
schema = schema_for_sample(([0.0] * 784, 0))
got = list(dealt_batches(records, PickleSerializer(), schema, 1 << 20))
assert sum(b.num_rows for b in got) == 300 and got[-1].column(1)[-1].as_py() == 299
rows = [(np.full(784, i, np.float32), i) for i in range(300)]
got = list(batches_of_rows(iter(rows), schema_for_sample(rows[0]), 1 << 20))
assert sum(b.num_rows for b in got) == 300 and got[-1].column(0)[-1].values[0].as_py() == 299.0
from tfos_notebook.runtime.node.task.feed.instage import task_output
(out,) = task_output("df", 3, {{"task": 3, "rows_per_epoch": [300]}})
assert out.column(0)[0].as_py() == 3 and out.column(1)[0].as_py() == b'{{"task": 3, "rows_per_epoch": [300]}}'
print("pandas" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
