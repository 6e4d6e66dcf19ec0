"""The behaviours TensorFlowOnSpark's own public-API tests check, on real Spark: results of
``inference`` keep their type and sum exactly (in-stage on its layout of 2 executors x 1 core, and
over the network), an exception during and after feeding fails the run, the reserved port is
released or held (``release_port``), ``shutdown(timeout)`` stops a cluster that overruns, and
TFParallel refuses more copies than slots."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from tfos_notebook import InputMode, NodeError, PreflightError, TFCluster, TFNode, TFParallel
from tfos_notebook.runtime.driver.events import Log

ROWS = [[x] for x in range(1000)]  # tensors of shape [1], as TensorFlowOnSpark's test feeds them
EXPECTED = sum(x * x for x in range(1000))


def numpy_squares(args, ctx):
    """TensorFlowOnSpark's test squares with ``tf.math.square(batch).numpy()``, an int32 array of
    shape [10, 1]; numpy gives the same without importing TensorFlow on the nodes."""
    feed = TFNode.DataFeed(ctx.mgr, False)
    while not feed.should_stop():
        batch = feed.next_batch(batch_size=10)
        if batch:
            squares = np.square(np.array(batch, dtype=np.int32))
            feed.batch_results(list(zip(squares[:, 0], [str(b[0]) for b in batch], strict=True)) if args["pairs"]
                               else squares)


def fail_when(args, ctx):
    """Answers like ``numpy_squares``, but raises after its first batch (``during``) or once the
    feed ended (``after``)."""
    feed = TFNode.DataFeed(ctx.mgr, False)
    while not feed.should_stop():
        batch = feed.next_batch(10)
        if batch:
            feed.batch_results(np.square(batch))
            if args["when"] == "during":
                raise RuntimeError("FAKE exception during feeding")
    time.sleep(1)
    raise RuntimeError("FAKE exception after feeding")


def hold_port(args, ctx):
    reserved = ctx.tmp_socket.getsockname()[1]
    probe = socket.socket()
    try:
        probe.bind(("0.0.0.0", reserved))
        bound_while_held = True
    except OSError:
        bound_while_held = False
    finally:
        probe.close()
    ctx.release_port()
    after = socket.socket()
    after.bind((ctx.host, reserved))  # TensorFlow's server can take it now
    after.close()
    mine = ctx.cluster_spec[ctx.job_name][ctx.task_index]
    return {"bound_while_held": bound_while_held, "released": ctx.tmp_socket is None,
            "port_is_mine": mine.endswith(f":{reserved}")}


def port_state(args, ctx):
    return {"tmp_socket": ctx.tmp_socket, "worker_num": ctx.worker_num, "executor_id": ctx.executor_id,
            "defaultFS": ctx.defaultFS, "working_dir": ctx.working_dir}


def sleeper(args, ctx):
    time.sleep(120)


@pytest.mark.cluster
def test_inference_results_keep_their_type_and_sum_exactly_on_the_tfos_layout(standalone):
    sc = standalone.sparkContext
    cluster = TFCluster.run(sc, numpy_squares, tf_args={"pairs": False}, num_executors=2, num_ps=0,
                            input_mode=InputMode.SPARK, preflight_wait=5)
    assert cluster.in_stage  # 2 executors x 1 core: each node fed by its own task
    rdd_out = cluster.inference(sc.parallelize(ROWS, 10))
    assert rdd_out.sum() == EXPECTED
    first = rdd_out.first()
    assert type(first) is np.ndarray and first.dtype == np.int32 and first.shape == (1,)
    cluster.shutdown()


@pytest.mark.cluster
def test_release_port_false_holds_the_reserved_port_until_ctx_release_port(standalone):
    cluster = TFCluster.run(standalone.sparkContext, hold_port, tf_args={}, num_executors=2, num_ps=0,
                            input_mode=InputMode.TENSORFLOW, master_node="chief", release_port=False, preflight_wait=5)
    info = cluster.cluster_info
    assert [(n["executor_id"], n["job_name"], n["task_index"]) for n in info] == [(0, "chief", 0), (1, "worker", 0)]
    assert all(n["port"] > 0 and n["tb_port"] == 0 for n in info)
    assert cluster.shutdown() == {"bound_while_held": False, "released": True, "port_is_mine": True}
    assert cluster.run_handle.results["worker:0"] == {"bound_while_held": False, "released": True,
                                                       "port_is_mine": True}


@pytest.mark.cluster
def test_tfparallel_refuses_more_copies_than_slots_at_once(standalone):
    started = time.monotonic()
    with pytest.raises(PreflightError, match="cannot launch 3 nodes"):
        TFParallel.run(standalone.sparkContext, port_state, tf_args={}, num_executors=3)
    assert time.monotonic() - started < 15


def test_inference_results_keep_their_type_over_the_network(local_spark):
    sc = local_spark.sparkContext
    cluster = TFCluster.run(sc, numpy_squares, {"pairs": False}, num_executors=1, input_mode=InputMode.SPARK)
    assert not cluster.in_stage  # local[2]: a slot to spare beside the node
    rdd_out = cluster.inference(sc.parallelize(ROWS, 10))
    assert rdd_out.sum() == EXPECTED
    assert type(rdd_out.first()) is np.ndarray and rdd_out.first().dtype == np.int32
    cluster.shutdown()


def test_three_fed_nodes_with_one_spare_slot_start_in_stage_each_fed_by_its_own_task(local_spark4):
    """local[4] has a slot beside three nodes, but a feed over the network through one slot deals
    the partitions of one node at a time, and a synchronous strategy's nodes fed first would wait in
    their all-reduce for the others (TensorFlowOnSpark's examples on local[3] hung so)."""
    sc = local_spark4.sparkContext
    cluster = TFCluster.run(sc, numpy_squares, {"pairs": False}, num_executors=3, input_mode=InputMode.SPARK)
    assert cluster.in_stage
    assert cluster.inference(sc.parallelize(ROWS, 6)).sum() == EXPECTED
    cluster.shutdown()


def test_tuple_results_stay_tuples_when_fed_in_stage(local_spark):
    sc = local_spark.sparkContext
    cluster = TFCluster.run(sc, numpy_squares, {"pairs": True}, num_executors=2, input_mode=InputMode.SPARK)
    assert cluster.in_stage
    out = sorted(cluster.inference(sc.parallelize(ROWS[:50], 5)).collect(), key=lambda r: r[0])
    assert out[7] == (49, "7") and type(out[7]) is tuple and type(out[7][0]) is np.int32
    cluster.shutdown()


def test_an_exception_during_feeding_fails_the_inference(local_spark):
    sc = local_spark.sparkContext
    with pytest.raises(NodeError, match="RuntimeError: FAKE exception during feeding"):
        cluster = TFCluster.run(sc, fail_when, {"when": "during"}, num_executors=2, input_mode=InputMode.SPARK)
        cluster.inference(sc.parallelize(ROWS, 10), feed_timeout=1).count()
        cluster.shutdown()


def test_an_exception_after_feeding_fails_the_shutdown(local_spark):
    sc = local_spark.sparkContext
    cluster = TFCluster.run(sc, fail_when, {"when": "after"}, num_executors=1, input_mode=InputMode.SPARK)
    assert cluster.inference(sc.parallelize(ROWS, 10)).count() == 1000
    with pytest.raises(NodeError, match="RuntimeError: FAKE exception after feeding"):
        cluster.shutdown(grace_secs=5)


def test_the_port_is_released_before_the_function_by_default(local_spark):
    cluster = TFCluster.run(local_spark.sparkContext, port_state, tf_args={}, num_executors=2, num_ps=0,
                            input_mode=InputMode.TENSORFLOW, master_node="chief")
    chief = cluster.shutdown()
    assert chief["tmp_socket"] is None and chief["worker_num"] == chief["executor_id"] == 0
    assert chief["defaultFS"].startswith("file:") and chief["working_dir"]
    assert cluster.cluster_info[1]["job_name"] == "worker"


def say_where(args, ctx):
    print(f"hello from {ctx.job_name} {ctx.task_index}", flush=True)


def test_outside_a_notebook_the_nodes_output_reaches_the_programs_stderr(local_spark, capfd):
    cluster = TFCluster.run(local_spark.sparkContext, say_where, None, 2, num_ps=0, master_node="chief")
    cluster.shutdown()
    err = capfd.readouterr().err
    assert "[chief:0] hello from chief 0" in err and "[worker:0] hello from worker 0" in err, err[-3000:]
    # the events keep every line, TensorFlow's notices too
    assert "hello from chief 0" in [e.line for e in cluster.run_handle.events.events(Log)]


def test_shutdown_stops_a_cluster_still_running_after_its_timeout(local_spark):
    cluster = TFCluster.run(local_spark.sparkContext, sleeper, tf_args={}, num_executors=1)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"shutdown\(timeout=2\): the nodes were still running, so the cluster "
                                           r"was stopped; raise the timeout \(or -1 for none\)"):
        cluster.shutdown(timeout=2)
    assert cluster.run_handle.done and time.monotonic() - started < 30
