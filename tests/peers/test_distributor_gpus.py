"""MirroredStrategyRunner's GPU allocation on the session's standalone cluster, in the layouts of
spark-tensorflow-distributor's own integration tests (``*_gpu_tasks_standalone`` in conftest.py):
2 workers advertising 4 GPUs each, every executor holding all 4, with 1, 2 or 4 GPUs per task.
GPUs are the fake addresses of the discovery script (there is no GPU here): what is checked is
what each task's training process is given in ``CUDA_VISIBLE_DEVICES``, read back through
``BarrierTaskContext``.
"""

from __future__ import annotations

import os

import pytest

from tfos_notebook import MirroredStrategyRunner
from tfos_notebook.peers.distributor import split_slots
from tfos_notebook.runtime.driver.events import FindingRaised, GpuAssigned

pytestmark = pytest.mark.cluster

def devices_of_every_task() -> list[str]:
    """Every task's CUDA_VISIBLE_DEVICES, by partition, gathered through the barrier task's context."""
    from pyspark import BarrierTaskContext

    return BarrierTaskContext.get().allGather(os.environ["CUDA_VISIBLE_DEVICES"])


def local_devices() -> str:
    return os.environ["CUDA_VISIBLE_DEVICES"]


def train_on(num_slots: int) -> tuple[MirroredStrategyRunner, list[list[str]]]:
    runner = MirroredStrategyRunner(num_slots=num_slots, use_custom_strategy=True)
    seen = runner.run(devices_of_every_task)
    return runner, [s.split(",") if s else [] for s in seen]


def assert_split(gpus_per_task: int, num_slots: int, runner, seen: list[list[str]]) -> None:
    tasks = -(-num_slots // gpus_per_task)
    assert runner.get_num_tasks() == runner.num_tasks == tasks
    assert [len(s) for s in seen] == split_slots(num_slots, tasks), (num_slots, seen)
    assert all(len(set(s)) == len(s) for s in seen)
    assigned = {e.task: e.addresses for e in runner.run_handle.events.events(GpuAssigned)}
    assert assigned == {i: tuple(s) for i, s in enumerate(seen)}  # the monitor shows the same devices


def test_one_gpu_tasks_use_the_executors_cuda_visible_devices_indexed_by_spark_addresses(one_gpu_tasks_standalone):
    usable = one_gpu_tasks_standalone.sparkContext.getConf().get("spark.executorEnv.CUDA_VISIBLE_DEVICES").split(",")
    assert usable == ["10", "11", "12", "13"]
    for num_slots in (2, 4, 6, 8):
        runner, seen = train_on(num_slots)
        assert_split(1, num_slots, runner, seen)
        # each executor's four tasks hold Spark addresses 0-3, which name devices 10-13
        assert all(d in usable for s in seen for d in s), seen
        if num_slots == 8:
            assert sorted(d for s in seen for d in s) == sorted(usable * 2)


def test_cpu_training_on_gpu_executors_gives_every_task_no_gpu(one_gpu_tasks_standalone):
    runner = MirroredStrategyRunner(num_slots=2, use_gpu=False, use_custom_strategy=True)
    assert runner.get_num_tasks() == 2
    assert runner.run(devices_of_every_task) == ["", ""]
    assert runner.run_handle.events.events(GpuAssigned) == []


def test_local_mode_takes_the_drivers_gpus_through_its_cuda_visible_devices_and_restores_it(
        one_gpu_tasks_standalone, monkeypatch):
    runner = MirroredStrategyRunner(num_slots=3, local_mode=True, use_custom_strategy=True)
    assert runner.num_tasks is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert runner.run(local_devices) == "0,1,2"
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "10,11,12,13")
    assert runner.run(local_devices) == "10,11,12"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "10,11,12,13"


def test_two_gpu_tasks_split_num_slots_first_tasks_taking_the_remainder(two_gpu_tasks_standalone):
    for num_slots in (2, 3, 4, 6, 8):
        runner, seen = train_on(num_slots)
        assert_split(2, num_slots, runner, seen)
        assert all(d in "0123" for s in seen for d in s)


def test_four_gpu_tasks_split_num_slots_and_the_ssl_override_lets_several_tasks_train(four_gpu_tasks_standalone):
    for num_slots in (2, 4, 6, 8):
        runner, seen = train_on(num_slots)
        assert_split(4, num_slots, runner, seen)
        warned = [e.finding for e in runner.run_handle.events.events(FindingRaised)
                  if e.finding.code == "tensorflow_traffic_unencrypted"]
        assert len(warned) == (runner.num_tasks > 1), warned
