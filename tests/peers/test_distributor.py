"""MirroredStrategyRunner, spark-tensorflow-distributor's runner, on local Spark: its API, its
refusals, and what the training function finds where it runs (the GPU layouts are in
test_distributor_gpus.py)."""

from __future__ import annotations

import json
import os

import pytest

from tfos_notebook import ConfigError, MirroredStrategyRunner, PreflightError
from tfos_notebook.peers.distributor import split_slots


def strategy_probe(scale):
    """Runs inside the runner's strategy scope: what a node sees."""
    import tensorflow as tf

    return {"replicas": tf.distribute.get_strategy().num_replicas_in_sync, "value": scale * 2,
            "tf_config": json.loads(os.environ["TF_CONFIG"])}


def environment_probe():
    import sys

    return {"pid": os.getpid(), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "tensorflow_imported": "tensorflow" in sys.modules, "tf_config": os.environ.get("TF_CONFIG")}


def barrier_context_probe():
    from pyspark import BarrierTaskContext, TaskContext

    context = BarrierTaskContext.get()
    return {"partition": context.partitionId(), "same": TaskContext.get() is context,
            "infos": len(context.getTaskInfos()), "gathered": context.allGather(f"from {context.partitionId()}")}


def test_runner_wraps_the_function_in_a_two_worker_mirrored_strategy_and_returns_worker_0s_value(local_spark):
    runner = MirroredStrategyRunner(num_slots=2, use_gpu=False, spark=local_spark)
    assert runner.get_num_tasks() == runner.num_tasks == 2
    out = runner.run(strategy_probe, scale=21)
    assert out["replicas"] == 2 and out["value"] == 42
    assert out["tf_config"]["task"] == {"type": "worker", "index": 0}
    assert list(out["tf_config"]["cluster"]) == ["worker"] and len(out["tf_config"]["cluster"]["worker"]) == 2
    assert runner.run_handle.results["worker:1"]["tf_config"]["task"]["index"] == 1
    assert not runner.run_handle.encrypted  # the cluster asks for no encryption


def test_the_training_function_reaches_its_barrier_task_context(local_spark):
    runner = MirroredStrategyRunner(num_slots=2, use_gpu=False, use_custom_strategy=True, spark=local_spark)
    runner.run(barrier_context_probe)
    assert [runner.run_handle.results[f"worker:{i}"] for i in (0, 1)] == [
        {"partition": i, "same": True, "infos": 2, "gathered": ["from 0", "from 1"]} for i in (0, 1)]


def test_sc_is_the_sessions_spark_context(local_spark):
    runner = MirroredStrategyRunner(num_slots=1, use_gpu=False, spark=local_spark)
    assert runner.sc is local_spark.sparkContext
    assert runner.sc.getConf().get("spark.master") == "local[2]"


def test_local_mode_runs_the_function_in_the_driver_process_without_gpus(local_spark):
    out = MirroredStrategyRunner(1, local_mode=True, use_gpu=False, use_custom_strategy=True,
                                 spark=local_spark).run(environment_probe)
    assert out["pid"] == os.getpid()
    assert out["cuda"] == ""


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"num_slots": 0}, "num_slots must be a whole number of at least 1, got 0"),
    ({"num_slots": 2, "local_mode": True, "use_gpu": False},
     "num_slots=2 CPU slots cannot run there; use num_slots=1, or local_mode=False"),
    ({"num_slots": 1, "gpu_resource_name": "accel"}, "only Spark's 'gpu' resource is supported"),
])
def test_impossible_arguments_are_refused_with_the_fix(local_spark, kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        MirroredStrategyRunner(spark=local_spark, **kwargs)
    assert isinstance(e.value, ValueError)  # what spark-tensorflow-distributor raised


def test_gpu_training_without_gpu_scheduling_fails_before_launch_naming_the_conf(local_spark):
    with pytest.raises(PreflightError) as e:
        MirroredStrategyRunner(num_slots=2, use_gpu=True, spark=local_spark)
    assert "use_gpu=True, but Spark assigns no GPUs to tasks" in str(e.value)
    assert "spark.task.resource.gpu.amount is not set" in str(e.value)
    assert "or pass use_gpu=False" in str(e.value)


def test_local_gpu_training_needs_driver_gpus(local_spark):
    runner = MirroredStrategyRunner(num_slots=1, local_mode=True, use_gpu=True, spark=local_spark)
    with pytest.raises(PreflightError, match="the driver owns 0 GPU"):
        runner.run(environment_probe)


def test_gpu_slots_are_spread_over_tasks_first_ones_taking_the_remainder():
    assert split_slots(5, 2) == [3, 2]
    assert split_slots(4, 4) == [1, 1, 1, 1]


@pytest.mark.cluster
def test_more_gpu_slots_than_the_cluster_holds_fail_in_preflight(standalone):
    runner = MirroredStrategyRunner(num_slots=3, use_gpu=True, use_custom_strategy=True, spark=standalone)
    with pytest.raises(PreflightError, match="cannot launch 3 nodes"):
        runner.run(environment_probe)
