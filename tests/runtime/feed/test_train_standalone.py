"""Feeding training data on a real standalone cluster (2 workers x 2 cores): exactly once per
epoch, uneven partitions, wide and nested rows, early terminate, timeout, failures."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tfos_notebook import FeedTimeout, NodeError, Run

from . import nodes

pytestmark = pytest.mark.cluster


def start(spark, fn, args, num_nodes, **kw) -> Run:
    run = Run(spark.sparkContext, fn, args, num_nodes, input_mode="spark", preflight_wait=5, **kw).start()
    run.wait_for_reservations(120)
    return run


def id_frame(spark, rows: int, full: int, empty: int):
    """Rows ``id, x=[id/2, id+1], s='row-id'`` in ``full`` partitions plus ``empty`` empty ones."""
    sc = spark.sparkContext
    rdd = sc.parallelize(range(rows), full).union(sc.parallelize([], empty))
    return (spark.createDataFrame(rdd.map(lambda i: (i,)), "id long")
            .selectExpr("id", "array(id * 0.5d, id + 1d) as x", "concat('row-', id) as s"))


def test_every_row_reaches_exactly_one_node_once_per_epoch(feed_standalone):
    df = id_frame(feed_standalone, 2000, full=4, empty=3)
    assert df.rdd.getNumPartitions() == 7
    run = start(feed_standalone, nodes.dataset_ids_per_epoch, {"epochs": 3, "batch": 64}, 2)
    summary = run.train(df, num_epochs=3)
    assert summary.epochs == 3 and summary.rows == 6000 and not summary.stopped_early
    assert sum(summary.rows_per_node.values()) == 6000 and all(summary.rows_per_node.values())
    per_node = run.wait(180)  # the chief's value; every node's is in run.results
    assert per_node == run.results["chief:0"]
    for epoch in range(3):
        ids = sorted(i for name, epochs in run.results.items() for i in epochs[epoch])
        assert ids == list(range(2000)), f"epoch {epoch}: rows missing or repeated"


def test_an_rdd_with_fewer_partitions_than_nodes_feeds_one_and_still_ends_both(feed_standalone):
    sc = feed_standalone.sparkContext
    rdd = sc.parallelize([(i, np.full(3, i, np.float32)) for i in range(500)], 1)
    run = start(feed_standalone, nodes.datafeed_ids, {"batch": 64}, 2)
    summary = run.train(rdd, num_epochs=2)
    assert summary.rows == 1000 and sorted(summary.rows_per_node.values()) == [0, 1000]
    run.wait(120)
    assert sorted(run.results["chief:0"] + run.results["worker:0"]) == sorted(list(range(500)) * 2)


def test_a_feeding_task_retried_mid_partition_still_delivers_each_row_once(feed_standalone):
    sc = feed_standalone.sparkContext

    def flaky(part, rows):
        from pyspark import TaskContext

        for n, row in enumerate(rows):
            if part == 1 and n == 1500 and TaskContext.get().attemptNumber() == 0:
                raise RuntimeError("lost the executor half way through the partition")
            yield row

    rdd = sc.parallelize([(i,) for i in range(6000)], 3).mapPartitionsWithIndex(flaky)
    run = start(feed_standalone, nodes.datafeed_ids, {"batch": 200}, 1)
    summary = run.train(rdd, num_epochs=1)
    run.wait(120)
    assert summary.rows == 6000
    assert sorted(run.result) == list(range(6000))


def test_megabyte_binary_strings_and_nested_image_arrays_arrive_intact(feed_standalone):
    df = feed_standalone.range(0, 24, numPartitions=3).selectExpr(
        "id",
        "unhex(repeat(lpad(hex(id % 256), 2, '0'), 1048576)) as blob",  # 1 MiB per row
        "concat('name-', id) as name",
        "array_repeat(array_repeat(cast(id as float), 8), 8) as image",
    )
    run = start(feed_standalone, nodes.wide_rows, None, 1)
    run.train(df, num_epochs=1)
    out = run.wait(180)
    assert out["shapes"]["image"][1:] == (8, 8) and out["dtypes"]["image"] == "float32"
    assert out["dtypes"]["blob"] == "string" and out["dtypes"]["name"] == "string"
    rows = sorted(out["rows"])
    assert [r[0] for r in rows] == list(range(24))
    for i, size, first, name, total, shape in rows:
        assert (size, first, name, total, shape) == (1 << 20, bytes([i % 256]), f"name-{i}", 64.0 * i, (8, 8))


def test_terminate_mid_epoch_ends_train_quickly_and_skips_the_rest(feed_standalone):
    df = feed_standalone.range(0, 400_000, numPartitions=16).selectExpr(
        "id", "array_repeat(cast(id as float), 64) as x")
    run = start(feed_standalone, nodes.terminate_after, {"batches": 5}, 1, feed_buffer_mb=4)
    t0 = time.monotonic()
    summary = run.train(df, num_epochs=5)
    elapsed = time.monotonic() - t0
    out = run.wait(60)
    assert out == {"rows": 500, "should_stop": True}
    assert summary.stopped_early and summary.epochs == 0
    assert summary.rows < 400_000, "feeding should stop long before the first epoch is through"
    assert elapsed < 60


def test_a_node_that_stops_reading_fails_train_with_feed_timeout(feed_standalone):
    df = feed_standalone.range(0, 200_000, numPartitions=4).selectExpr("id", "array_repeat(1.0f, 64) as x")
    run = start(feed_standalone, nodes.never_reads, {"sleep": 120}, 1, feed_buffer_mb=2)
    t0 = time.monotonic()
    with pytest.raises(FeedTimeout, match=r"chief:0 .* took no data for more than 4s"):
        run.train(df, num_epochs=1, feed_timeout=4)
    assert time.monotonic() - t0 < 40
    run.stop()


def test_a_node_failing_while_fed_fails_train_with_that_nodes_error(feed_standalone):
    df = feed_standalone.range(0, 300_000, numPartitions=6).selectExpr("id", "array_repeat(1.0f, 64) as x")
    run = start(feed_standalone, nodes.fail_while_fed, None, 1, feed_buffer_mb=2)
    with pytest.raises(NodeError, match="boom on purpose, while being fed") as err:
        run.train(df, num_epochs=3)
    assert err.value.role == "chief"
    # train raises as soon as the error is known; the run then ends, its processes cleaned up
    with pytest.raises(NodeError, match="boom on purpose"):
        run.wait(60)
    assert run.state == "failed"
