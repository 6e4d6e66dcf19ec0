"""%%tfos_train --gpus on tasks that hold more GPUs than asked for (the session's standalone
cluster with 2 fake GPUs per task): each node sees exactly as many as asked."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.cluster

CELL = """%%tfos_train --workers 2 --gpus 1 --name gpu_run --monitor none --no-tensorboard
import os
return os.environ["CUDA_VISIBLE_DEVICES"], list(ctx.gpus)
"""


def test_gpus_gives_each_node_exactly_that_many_of_its_tasks_gpus(ip, two_gpu_tasks_standalone):
    assert two_gpu_tasks_standalone.sparkContext.getConf().get("spark.task.resource.gpu.amount") == "2"
    result = ip.run_cell(CELL)
    assert result.success, result.error_in_exec
    run = ip.user_ns["gpu_run"]
    run.wait(120)
    seen = list(run.results.values())
    assert len(seen) == 2
    for devices, addresses in seen:
        assert devices in ("0", "1", "2", "3") and addresses == [devices]
