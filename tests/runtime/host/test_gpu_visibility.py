"""Which GPUs a node's process sees: its count out of what its task holds, and Spark's addresses
read through a ``CUDA_VISIBLE_DEVICES`` the executor (or driver) already has. Pure functions: the
runs that use them are in tests/peers/test_distributor_gpus.py."""

from __future__ import annotations

import pytest

from tfos_notebook import ConfigError
from tfos_notebook.runtime.driver.run.launch import node_gpu_counts
from tfos_notebook.runtime.host.gpus import visible_devices


@pytest.mark.parametrize(("addresses", "inherited", "devices"), [
    (["0", "2"], None, ["0", "2"]),
    (["0", "2"], "10,11,12,13", ["10", "12"]),
    (["3"], " 10, 11 ,12,13", ["13"]),
    (["1"], "GPU-5d1e,GPU-a2f0", ["GPU-a2f0"]),  # UUIDs are devices too
    ([], "", []),
    ([], "10,11", []),
])
def test_spark_addresses_index_an_inherited_cuda_visible_devices(addresses, inherited, devices):
    assert visible_devices(addresses, inherited) == devices


@pytest.mark.parametrize(("addresses", "inherited", "message"), [
    (["4"], "10,11,12,13", "Spark gave GPU address 4, but CUDA_VISIBLE_DEVICES='10,11,12,13' lists 4 device(s): "
                           "Spark's GPU addresses are positions in it; make it list every GPU the discovery script "
                           "reports, or unset it"),
    (["0"], "", "Spark gave GPU address 0, but CUDA_VISIBLE_DEVICES='' lists 0 device(s)"),
    (["01"], "10,11", "Spark gave GPU address '01', which cannot index CUDA_VISIBLE_DEVICES=10,11: with "
                      "CUDA_VISIBLE_DEVICES set, Spark's GPU addresses are positions in it; make the GPU discovery "
                      "script report 0, 1, 2..., or unset CUDA_VISIBLE_DEVICES"),
    (["GPU-5d1e"], "10,11", "Spark gave GPU address 'GPU-5d1e', which cannot index"),
])
def test_an_address_that_cannot_index_the_inherited_list_is_refused_with_the_fix(addresses, inherited, message):
    with pytest.raises(ConfigError) as e:
        visible_devices(addresses, inherited)
    assert str(e.value).startswith(message)


def test_each_node_uses_its_own_count_or_every_gpu_of_its_task():
    assert node_gpu_counts(0, 3) == ()  # whatever spark.task.resource.gpu.amount gives
    assert node_gpu_counts(2, 3) == (2, 2, 2)
    assert node_gpu_counts([4, 3, 0], 3) == (4, 3, 0)
    for bad in (-1, [1, 2], [1, -1, 1]):
        with pytest.raises(ConfigError, match="gpus_per_node must be a whole number of 0 or more, or one such "
                                              r"number per node \(3\), got"):
            node_gpu_counts(bad, 3)
