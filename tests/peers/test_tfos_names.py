"""TensorFlowOnSpark names beyond TFCluster.run/train/inference: TFParallel, ctx.get_data_feed,
release_port."""

from __future__ import annotations

import os

from tfos_notebook import InputMode, TFCluster, TFNode, TFParallel


def independent_copy(args, ctx):
    return {"n": ctx.worker_num, "copies": ctx.num_workers, "tf_config": "TF_CONFIG" in os.environ,
            "offset": args["offset"]}


def read_with_get_data_feed(args, ctx):
    TFNode.release_port(ctx)
    feed = ctx.get_data_feed(train_mode=True)
    rows = []
    while not feed.should_stop():
        rows += [r[0] for r in feed.next_batch(16)]
    return sorted(rows)


def test_tfparallel_runs_independent_copies_without_tf_config(local_spark):
    out = TFParallel.run(local_spark.sparkContext, independent_copy, {"offset": 5}, 2)
    assert out == [{"n": i, "copies": 2, "tf_config": False, "offset": 5} for i in range(2)]


def test_get_data_feed_and_release_port_work_as_in_tensorflowonspark(local_spark):
    cluster = TFCluster.run(local_spark.sparkContext, read_with_get_data_feed, None, 1,
                            input_mode=InputMode.SPARK)
    cluster.train(local_spark.sparkContext.parallelize([(i,) for i in range(40)], 3), num_epochs=1)
    assert cluster.shutdown() == list(range(40))
