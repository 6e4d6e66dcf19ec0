"""Inference on a real standalone cluster: every input row gets exactly its own prediction."""

from __future__ import annotations

import time

import pytest

from tfos_notebook import InputMode, NodeError, Run, TFCluster

from . import nodes

pytestmark = pytest.mark.cluster


def test_dataframe_inference_keeps_key_columns_next_to_each_rows_prediction(feed_standalone):
    df = feed_standalone.range(0, 3000, numPartitions=7).selectExpr("id", "array(id * 1d, id * 2d) as x")
    run = Run(feed_standalone.sparkContext, nodes.predict_sum, {"batch": 64}, 2, input_mode="spark",
              preflight_wait=5).start()
    run.wait_for_reservations(120)
    out = run.inference(df, schema="prediction double", keep=["id"])
    assert out.columns == ["id", "prediction"]
    rows = out.collect()
    assert len(rows) == 3000
    assert all(r.prediction == 3.0 * r.id for r in rows)
    assert sorted(r.id for r in rows) == list(range(3000))

    learned = run.inference(df.where("id < 10").repartition(3))  # no schema: learned from the first answer
    assert learned.schema["prediction"].dataType.typeName() == "double"
    assert learned.columns == ["id", "x", "prediction"]
    assert {(r.id, r.prediction) for r in learned.collect()} == {(i, 3.0 * i) for i in range(10)}
    run.end_feed()
    answered = run.wait(120)
    assert answered >= 1000  # the chief's share of 3000 rows, plus the probe row


def test_tfos_rdd_inference_returns_one_result_per_row_in_order(feed_standalone):
    sc = feed_standalone.sparkContext
    cluster = TFCluster.run(sc, nodes.tfos_inference, {"batch": 30}, num_executors=2, input_mode=InputMode.SPARK,
                            preflight_wait=5)
    data = sc.parallelize(range(1000), 5)
    results = cluster.inference(data).collect()
    assert results == [f"{i * 2}" for i in range(1000)]
    cluster.shutdown()
    assert sum(cluster.run_handle.results.values()) == 1000


def test_tfos_training_program_runs_unchanged_with_train_then_shutdown(feed_standalone):
    sc = feed_standalone.sparkContext
    cluster = TFCluster.run(sc, nodes.datafeed_ids, {"batch": 50}, num_executors=2, input_mode=InputMode.SPARK,
                            preflight_wait=5)
    cluster.train(sc.parallelize([(i, [float(i)] * 4) for i in range(400)], 4), num_epochs=2)
    cluster.train(sc.parallelize([(i,) for i in range(400, 500)], 2), num_epochs=1)
    cluster.shutdown()
    ids = sorted(i for values in cluster.run_handle.results.values() for i in values)
    assert ids == sorted(list(range(400)) * 2 + list(range(400, 500)))


def test_inference_reports_the_failed_nodes_own_error_promptly(feed_standalone):
    df = feed_standalone.range(0, 400, numPartitions=4).selectExpr("id", "array(id * 1d, id * 2d) as x")
    run = Run(feed_standalone.sparkContext, nodes.predict_unless_worker, {"fail_after": 3, "model": "/models/m1"},
              2, input_mode="spark", preflight_wait=5, retries=0).start()
    run.wait_for_reservations(120)
    out = run.inference(df, schema="prediction double", keep=["id"])  # before the worker fails
    with pytest.raises(NodeError, match="no saved model at /models/m1"):
        run.wait(60)
    t0 = time.monotonic()
    with pytest.raises(Exception, match="worker:0 on .* failed: .*FileNotFoundError: no saved model") as info:
        out.collect()
    assert time.monotonic() - t0 < 30, "Spark's task retries each failed at once"
    assert "cannot reach the data feed" not in str(info.value)
