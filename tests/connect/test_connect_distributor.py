"""MirroredStrategyRunner on a Spark Connect session: it launches through the Connect backend, its
function reaches its barrier task's context there too, and ``runner.sc`` says why there is none."""

from __future__ import annotations

import pytest

from tfos_notebook import ConfigError, MirroredStrategyRunner


def gathered_partitions():
    from pyspark import BarrierTaskContext

    context = BarrierTaskContext.get()
    return context.allGather(str(context.partitionId()))


def test_the_runner_trains_through_connect_and_its_function_reaches_the_barrier_context(connect_spark):
    runner = MirroredStrategyRunner(num_slots=2, use_gpu=False, use_custom_strategy=True, spark=connect_spark)
    assert runner.get_num_tasks() == 2
    assert runner.run(gathered_partitions) == ["0", "1"]
    assert runner.run_handle.backend.kind == "connect"
    with pytest.raises(ConfigError, match="runner.sc: a Spark Connect session has no SparkContext; read the conf "
                                          r"with runner.spark.conf.get\(key\) instead"):
        runner.sc  # noqa: B018
