"""In-stage feeding: each node's own barrier task feeds it, so input mode spark works on clusters
with exactly as many task slots as nodes (TensorFlowOnSpark's layout, and every GPU cluster).

``local[2]`` and the session's standalone cluster (2 workers x 1 core, each task needing one of the
workers' fake GPU addresses) both have exactly two slots for two nodes: no task is left for
feeding from outside the gang. GPUs are fake here (discovery script addresses): what is checked is
that Spark assigns them and each node sees only its own.
"""

from __future__ import annotations

import pytest

from tfos_notebook import InputMode, Run, TFCluster
from tfos_notebook.runtime.driver.events import FeedPlanned
from tfos_notebook.runtime.driver.feed.instage import _murmur3_int, partition_keys

from . import nodes

ROWS = 1000


def expected_sums(n: int = ROWS) -> list[int]:
    return [n, sum(range(n)), sum(i * i for i in range(n))]


def per_epoch_totals(results: dict) -> list[list[int]]:
    epochs = len(next(iter(results.values()))["sums"])
    return [[sum(r["sums"][e][k] for r in results.values()) for k in range(3)] for e in range(epochs)]


def test_partition_keys_send_each_key_to_its_task_as_spark_hashes(local_spark):
    from pyspark.sql import functions as F

    values = list(range(50))
    spark_hashes = [r.h for r in local_spark.createDataFrame([(v,) for v in values], "v int")
                    .select(F.hash("v").alias("h")).collect()]
    assert spark_hashes == [_murmur3_int(v) for v in values]
    keys = partition_keys(5, [1, 3, 4])
    df = local_spark.createDataFrame([(k,) for k in keys], "k int").repartition(5, "k")
    placed = df.rdd.mapPartitionsWithIndex(lambda i, rows: [(i, r.k) for r in rows]).collect()
    assert sorted(placed) == sorted(zip([1, 3, 4], keys, strict=True))


def test_dataframe_is_fed_exactly_once_per_epoch_with_as_many_slots_as_nodes(local_spark):
    df = local_spark.range(0, ROWS, numPartitions=3).selectExpr("id")
    run = Run(local_spark, nodes.epoch_checksums, {"epochs": 3}, 2, input_mode="spark").start(df, epochs=3)
    run.wait(300)
    assert per_epoch_totals(run.results) == [expected_sums()] * 3
    assert [e.path for e in run.events.events(FeedPlanned)] == ["in-stage"]
    assert run.instage.epochs_fed() == 3 and sum(run.instage.rows_per_node().values()) == 3 * ROWS


def test_a_relaunched_run_feeds_every_epoch_exactly_once_again(local_spark):
    from pyspark.sql import Row

    rdd = local_spark.sparkContext.parallelize([Row(id=i) for i in range(ROWS)], 4)
    run = Run(local_spark, nodes.epoch_checksums, {"epochs": 3, "kill_worker_once": True}, 2, input_mode="spark",
              retries=1).start(rdd, epochs=3)
    run.wait(300)
    assert run.attempt == 1  # worker 0 was killed in the first attempt
    assert per_epoch_totals(run.results) == [expected_sums()] * 3


def test_tfos_program_trains_on_local_2_with_train_then_shutdown(local_spark):
    sc = local_spark.sparkContext
    cluster = TFCluster.run(sc, nodes.datafeed_ids, {"batch": 50}, num_executors=2, input_mode=InputMode.SPARK)
    assert cluster.in_stage  # local[2]: no slot beside the two nodes
    summary = cluster.train(sc.parallelize([(i, [float(i)] * 4) for i in range(400)], 4), num_epochs=2)
    assert (summary.epochs, summary.rows) == (2, 800)
    with pytest.raises(Exception, match="feed all epochs in one train"):
        cluster.train(sc.parallelize([(1,)]), num_epochs=1)
    cluster.shutdown()
    ids = sorted(i for values in cluster.run_handle.results.values() for i in values)
    assert ids == sorted(list(range(400)) * 2)


def test_tfos_rdd_inference_gives_one_result_per_row_with_as_many_slots_as_nodes(local_spark):
    sc = local_spark.sparkContext
    cluster = TFCluster.run(sc, nodes.tfos_inference, {"batch": 30}, num_executors=2, input_mode=InputMode.SPARK)
    results = cluster.inference(sc.parallelize(range(ROWS), 5)).collect()
    assert sorted(results, key=int) == [f"{i * 2}" for i in range(ROWS)]
    cluster.shutdown()
    assert sum(cluster.run_handle.results.values()) == ROWS


def test_dataframe_inference_keeps_columns_beside_each_prediction(local_spark):
    df = local_spark.range(0, ROWS, numPartitions=3).selectExpr("id", "array(id * 1d, id * 2d) as x")
    run = Run(local_spark, nodes.predict_sum, {"batch": 64}, 2, input_mode="spark")
    out = run.start(df, predict=True, keep=["id"]).predictions()
    rows = out.collect()
    assert out.columns[0] == "id" and len(rows) == ROWS
    assert all(r[1] == 3.0 * r.id for r in rows)
    assert sorted(r.id for r in rows) == list(range(ROWS))


@pytest.mark.cluster
def test_tfos_layout_with_a_gpu_per_task_feeds_each_node_on_its_own_gpu(standalone):
    """2 workers x 1 core, spark.task.resource.gpu.amount=1: every task needs a GPU."""
    assert standalone.sparkContext.getConf().get("spark.task.resource.gpu.amount") == "1"
    df = standalone.range(0, ROWS, numPartitions=4).selectExpr("id")
    run = Run(standalone, nodes.epoch_checksums, {"epochs": 2}, 2, input_mode="spark", gpus_per_node=1,
              preflight_wait=5).start(df, epochs=2)
    run.wait(300)
    assert per_epoch_totals(run.results) == [expected_sums()] * 2
    for result in run.results.values():
        assert len(result["gpus"]) == 1 and result["visible"] == result["gpus"][0]


@pytest.mark.cluster
def test_tfos_program_runs_on_the_standalone_tfos_layout(standalone):
    sc = standalone.sparkContext
    cluster = TFCluster.run(sc, nodes.datafeed_ids, {"batch": 50}, num_executors=2, input_mode=InputMode.SPARK,
                            preflight_wait=5)
    assert cluster.in_stage
    cluster.train(sc.parallelize([(i,) for i in range(300)], 3), num_epochs=3)
    cluster.shutdown()
    ids = sorted(i for values in cluster.run_handle.results.values() for i in values)
    assert ids == sorted(list(range(300)) * 3)
