"""MirroredStrategyRunner, spark-tensorflow-distributor's runner, on real Spark (GPUs are the fake
addresses of the standalone cluster's discovery script: there is no GPU here)."""

from __future__ import annotations

import json
import os

import pytest

from tfos_notebook import ConfigError, MirroredStrategyRunner, PreflightError
from tfos_notebook.peers.distributor import split_slots
from tfos_notebook.runtime.driver.spark import backend_for


@pytest.fixture
def two_gpu_tasks_standalone(standalone_cluster, spark_slot):
    """The session's standalone cluster, with an application whose tasks take 2 GPUs each."""
    import time

    spark = spark_slot.get("standalone-2gpu", standalone_cluster.spark_conf(gpus_per_task=2))
    deadline = time.monotonic() + 60
    while len(backend_for(spark).cluster().executors) < standalone_cluster.workers:
        assert time.monotonic() < deadline, "the executors did not register within 60s"
        time.sleep(0.2)
    return spark


def gpu_assignments(run) -> dict[str, str]:
    """``role:index`` -> the GPU addresses Spark gave that node, from the run's events."""
    return {f"{e.role}:{e.index}": ",".join(e.addresses) for e in run.events.events()
            if type(e).__name__ == "GpuAssigned"}


def strategy_probe(scale):
    """Runs inside the runner's strategy scope: what a node sees."""
    import tensorflow as tf

    return {"replicas": tf.distribute.get_strategy().num_replicas_in_sync, "value": scale * 2,
            "tf_config": json.loads(os.environ["TF_CONFIG"])}


def environment_probe():
    import sys

    return {"pid": os.getpid(), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "tensorflow_imported": "tensorflow" in sys.modules, "tf_config": os.environ.get("TF_CONFIG")}


def test_runner_wraps_the_function_in_a_two_worker_mirrored_strategy_and_returns_worker_0s_value(local_spark):
    runner = MirroredStrategyRunner(num_slots=2, use_gpu=False, spark=local_spark)
    out = runner.run(strategy_probe, scale=21)
    assert out["replicas"] == 2 and out["value"] == 42
    assert out["tf_config"]["task"] == {"type": "worker", "index": 0}
    assert list(out["tf_config"]["cluster"]) == ["worker"] and len(out["tf_config"]["cluster"]["worker"]) == 2
    assert runner.run_handle.results["worker:1"]["tf_config"]["task"]["index"] == 1


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
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        MirroredStrategyRunner(spark=local_spark, **kwargs)


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
def test_each_task_sees_only_the_gpu_spark_assigned_it(standalone):
    runner = MirroredStrategyRunner(num_slots=2, use_gpu=True, use_custom_strategy=True, spark=standalone)
    assert runner.num_tasks == 2
    out = runner.run(environment_probe)
    results = runner.run_handle.results
    assert out == results["worker:0"]
    assigned = gpu_assignments(runner.run_handle)
    assert set(assigned) == {"worker:0", "worker:1"}
    for name, seen in results.items():
        assert seen["cuda"] == assigned[name] and len(seen["cuda"].split(",")) == 1
        assert not seen["tensorflow_imported"]  # use_custom_strategy: no strategy was made for it
        assert json.loads(seen["tf_config"])["task"]["type"] == "worker"


@pytest.mark.cluster
def test_more_gpu_slots_than_the_cluster_holds_fail_in_preflight(standalone):
    runner = MirroredStrategyRunner(num_slots=3, use_gpu=True, use_custom_strategy=True, spark=standalone)
    with pytest.raises(PreflightError, match="cannot launch 3 nodes"):
        runner.run(environment_probe)


@pytest.mark.cluster
def test_exactly_num_slots_gpus_train_when_tasks_hold_more(two_gpu_tasks_standalone):
    runner = MirroredStrategyRunner(num_slots=3, use_gpu=True, use_custom_strategy=True,
                                    spark=two_gpu_tasks_standalone)
    assert runner.num_tasks == 2
    runner.run(environment_probe)
    assigned = gpu_assignments(runner.run_handle)
    assert all(len(a.split(",")) == 2 for a in assigned.values()), assigned
    results = runner.run_handle.results
    assert results["worker:0"]["cuda"] == assigned["worker:0"]  # both of its GPUs
    assert results["worker:1"]["cuda"] == assigned["worker:1"].split(",")[0]  # one of its two
