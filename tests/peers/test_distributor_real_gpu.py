"""On a machine with real NVIDIA GPUs (and ``tfos_notebook[gpu]``): MirroredStrategyRunner's split
of ``num_slots`` GPUs over its tasks, read back from TensorFlow and from ``nvidia-smi``, with the
executors' ``CUDA_VISIBLE_DEVICES`` listing the GPUs by UUID in reverse order, so that Spark's
address 0 must name the last GPU. Skipped, with the reason, where no GPU answers (CI never has one).
"""

from __future__ import annotations

import subprocess

import pytest

from tfos_notebook import MirroredStrategyRunner
from tfos_notebook.peers.distributor import split_slots

pytestmark = [pytest.mark.gpu, pytest.mark.cluster]


def gpu_uuids() -> list[str]:
    out = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True,
                         text=True, check=True)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def gpus_in_use() -> list[str]:
    """What each task's training process sees and holds, gathered from every task by partition."""
    import json
    import os

    import tensorflow as tf
    from pyspark import BarrierTaskContext

    devices = tf.config.list_physical_devices("GPU")
    held = []
    for i in range(len(devices)):
        with tf.device(f"/GPU:{i}"):
            held.append(tf.ones((1024, 1024)))  # memory on every visible GPU, so nvidia-smi lists us there
    apps = subprocess.run(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader"],
                          capture_output=True, text=True, check=True).stdout
    mine = sorted(uuid.strip() for uuid, pid in (line.split(",") for line in apps.splitlines() if "," in line)
                  if int(pid) == os.getpid())
    seen = {"visible": os.environ["CUDA_VISIBLE_DEVICES"], "tf_gpus": len(devices), "holding": mine}
    return BarrierTaskContext.get().allGather(json.dumps(seen))


@pytest.mark.parametrize("all_per_task", [True, False], ids=["one task holds every GPU", "one GPU per task"])
def test_each_task_trains_on_exactly_its_share_named_through_the_executors_cuda_visible_devices(
        real_gpu_cluster, spark_slot, all_per_task):
    import json

    uuids = gpu_uuids()
    per_task = len(uuids) if all_per_task else 1
    spark_slot.get(f"real-gpu-{per_task}", {
        **real_gpu_cluster.spark_conf(gpus_per_task=per_task), "spark.ui.showConsoleProgress": "false",
        "spark.executorEnv.CUDA_VISIBLE_DEVICES": ",".join(reversed(uuids))})
    for num_slots in range(1, min(len(uuids), 4) + 1):
        runner = MirroredStrategyRunner(num_slots=num_slots)
        seen = [json.loads(s) for s in runner.run(gpus_in_use)]
        counts = split_slots(num_slots, runner.num_tasks)
        assert [s["tf_gpus"] for s in seen] == counts
        names = [s["visible"].split(",") for s in seen]
        if all_per_task:  # one task, whose Spark addresses 0..num_slots-1 name the last GPUs
            assert [sorted(n) for n in names] == [sorted(list(reversed(uuids))[:num_slots])]
        else:  # one task per GPU, each on its own
            assert len({n for task in names for n in task}) == num_slots
        assert [sorted(task) for task in names] == [s["holding"] for s in seen]
