"""Mistakes a user can make with InputMode.SPARK, each answered with what to do (local Spark)."""

from __future__ import annotations

import pytest

from tfos_notebook import ConfigError, FeedError, Run, TFCluster
from tfos_notebook.runtime.driver.feed.data import DataSample
from tfos_notebook.runtime.node.child.feed.datafeed import DataFeed, feed_of


def noop(args, ctx):
    return None


def test_feeding_a_run_started_for_tensorflow_input_says_how_to_start_it(local_spark):
    run = Run(local_spark.sparkContext, noop, None, 1)
    with pytest.raises(ConfigError, match="needs Run\\(..., input_mode='spark'\\)"):
        run.train(local_spark.range(3))
    cluster = TFCluster.TFCluster(run, TFCluster.InputMode.TENSORFLOW)
    with pytest.raises(ConfigError, match="input_mode=InputMode.SPARK"):
        cluster.inference(local_spark.range(3))


def test_an_unknown_input_mode_is_refused(local_spark):
    with pytest.raises(ConfigError, match="input_mode must be 'tensorflow' or 'spark'"):
        Run(local_spark.sparkContext, noop, None, 1, input_mode="kafka")


def test_only_dataframes_and_rdds_can_be_fed():
    with pytest.raises(FeedError, match="expected a Spark DataFrame or RDD, got list"):
        DataSample.of([1, 2, 3])


def test_a_node_without_a_feed_says_why():
    with pytest.raises(FeedError, match="start the cluster with input_mode=InputMode.SPARK"):
        DataFeed(None)
    with pytest.raises(FeedError, match="only chief and worker nodes are fed"):
        feed_of(object())


def test_feeding_when_the_nodes_hold_every_slot_fails_at_once_with_the_fix(local_spark):
    run = Run(local_spark.sparkContext, noop, None, 2, input_mode="spark")  # local[2]: two slots, two nodes
    with pytest.raises(FeedError, match="no task is left to feed them over the network: give the data when the run starts"):
        run.train(local_spark.range(3))
