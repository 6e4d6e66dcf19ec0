"""Runs on a cluster that asks for encrypted traffic (``spark.ssl.enabled=true``): the control
channel and the data feeds speak TLS, and a launch whose TensorFlow nodes would talk to each
other unencrypted is refused unless ``tensorflow.spark.distributor.ignoreSsl=true`` accepts it."""

from __future__ import annotations

import pytest

from tfos_notebook import MirroredStrategyRunner, PreflightError, Run
from tfos_notebook.runtime.driver.diagnosis.diagnose import Snapshot, diagnose
from tfos_notebook.runtime.driver.events import FindingRaised
from tfos_notebook.runtime.driver.events.finding import BLOCKER, WARNING


def fed_ids(args, ctx):
    from tfos_notebook import TFNode

    feed = TFNode.DataFeed(ctx.mgr)
    ids = []
    while not feed.should_stop():
        ids += [row[0] for row in feed.next_batch(100)]
    return ids


def nothing():
    return None


def test_one_node_trains_with_its_control_and_feed_channels_encrypted(local_ssl_spark):
    run = Run(local_ssl_spark, fed_ids, None, 1, input_mode="spark", preflight_wait=0).start()
    assert run.encrypted
    # local[2]: the node holds one slot, Spark tasks in the other feed it over the network
    summary = run.train(local_ssl_spark.sparkContext.parallelize([(i,) for i in range(300)], 3), num_epochs=2)
    assert (summary.epochs, summary.rows) == (2, 600)
    assert sorted(run.wait(120)) == sorted(list(range(300)) * 2)
    assert [e for e in run.events.events(FindingRaised) if e.finding.code == "tensorflow_traffic_unencrypted"] == []


def test_several_nodes_are_refused_naming_the_encryption_and_the_override(local_ssl_spark):
    runner = MirroredStrategyRunner(num_slots=2, use_gpu=False, spark=local_ssl_spark)
    with pytest.raises(PreflightError) as e:
        runner.run(nothing)
    assert str(e.value) == "\n".join([
        "cannot launch 2 nodes:",
        "- the cluster asks for encrypted traffic, but TensorFlow's traffic between the 2 nodes cannot be encrypted",
        "    evidence: spark.ssl.enabled=true",
        "    evidence: 2 nodes exchange gradients and variables over TensorFlow's gRPC, which has no encryption",
        "    evidence: tfos_notebook's own control and data channels are encrypted (TLS)",
        "    fix: train on one node (one Spark task, with all its GPUs), or accept unencrypted TensorFlow traffic "
        "between the nodes: set tensorflow.spark.distributor.ignoreSsl=true in the Spark conf"])
    assert local_ssl_spark.sparkContext.parallelize(range(4), 2).count() == 4


@pytest.mark.parametrize(("nodes", "talk", "ignore", "severity"), [
    (2, True, False, BLOCKER), (2, True, True, WARNING), (1, True, False, None), (2, False, False, None)])
def test_unencrypted_tensorflow_traffic_is_a_blocker_a_warning_when_accepted_and_none_without_it(
        nodes, talk, ignore, severity):
    snap = Snapshot(requested_tasks=nodes, total_slots=4, encryption="spark.ssl.enabled=true", ignore_ssl=ignore,
                    nodes_talk=talk)  # talk=False: independent copies (TFParallel), no traffic between them
    found = [f for f in diagnose(snap) if f.code == "tensorflow_traffic_unencrypted"]
    assert [f.severity for f in found] == ([severity] if severity else [])


def test_a_cluster_that_asks_for_no_encryption_is_not_warned():
    assert diagnose(Snapshot(requested_tasks=2, total_slots=4)) == []
