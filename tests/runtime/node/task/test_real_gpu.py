"""On a machine with a real NVIDIA GPU (and ``tfos_notebook[gpu]``, TensorFlow's CUDA build):
Spark hands each node its GPU, TensorFlow sees exactly that one, NVML names the node's process
while it holds the GPU, and the GPU is free again once the run ends. Skipped, with the reason,
where no GPU answers (CI never has one)."""

from __future__ import annotations

import subprocess
import time

import pytest
from procs import eventually

from tfos_notebook import Run
from tfos_notebook.runtime.host.gpus import gpu_processes
from tfos_notebook.runtime.host.orphans import run_marks

pytestmark = [pytest.mark.gpu, pytest.mark.cluster]


def gpu_indices() -> list[str]:
    out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                         text=True, check=True)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


@pytest.fixture
def gpu_standalone(real_gpu_cluster, spark_slot):
    """The session's real-GPU worker; every task needs one GPU."""
    return spark_slot.get("gpu", {**real_gpu_cluster.spark_conf(gpus_per_task=1),
                                  "spark.ui.showConsoleProgress": "false"})


def train_on_gpu(args, ctx):
    """Reads the fed rows and sums them on the GPU; says what TensorFlow saw."""
    import os

    import tensorflow as tf

    if not tf.test.is_built_with_cuda():
        raise RuntimeError("this TensorFlow has no CUDA: install tfos_notebook[gpu] (not tensorflow-cpu) here")
    total, device = 0.0, ""
    for batch in ctx.dataset(64, features="x"):
        with tf.device("/GPU:0"):
            s = tf.reduce_sum(batch)
        total, device = total + float(s.numpy()), s.device
    return {"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "gpus": list(ctx.gpus), "device": device,
            "tf_gpus": len(tf.config.list_physical_devices("GPU")), "total": total}


def hold_gpu(args, ctx):
    import tensorflow as tf

    x = tf.random.uniform((2048, 2048))  # on the GPU: it now holds memory there
    time.sleep(args["secs"])
    return float(tf.reduce_sum(x).numpy())


def test_a_fed_node_sees_exactly_its_spark_gpu_and_computes_on_it(gpu_standalone):
    df = gpu_standalone.range(0, 1000, numPartitions=2).selectExpr("cast(id as double) as x")
    run = Run(gpu_standalone, train_on_gpu, {}, 1, input_mode="spark", gpus_per_node=1,
              preflight_wait=5).start(df, epochs=1)
    result = run.wait(600)
    assert result["gpus"] == [result["visible"]] and result["visible"] in gpu_indices()
    assert result["tf_gpus"] == 1 and "GPU:0" in result["device"]
    assert result["total"] == sum(range(1000))


def test_nvml_names_the_node_holding_the_gpu_and_it_is_free_after_the_run(gpu_standalone):
    import psutil

    run = Run(gpu_standalone, hold_gpu, {"secs": 60}, 1, gpus_per_node=1, preflight_wait=5).start()
    run.wait_for_reservations(120)

    def ours() -> list:
        found = []
        for p in gpu_processes() or []:
            try:
                marks = run_marks(psutil.Process(p.pid))  # a forked node's process: from its node's record
                if marks is not None and marks.run_id == run.run_id:
                    found.append(p)
            except psutil.Error:
                continue
        return found

    assert eventually(lambda: bool(ours()), timeout=120), "NVML never showed the node's process on the GPU"
    assert ours()[0].used_mib > 0
    run.stop(60)
    assert eventually(lambda: not ours(), timeout=30), "the node's process still holds the GPU after stop"
