"""The GPU map: a node's sampler reads NVML and reports each GPU's utilisation and memory; the
driver turns the report into a GpuStats event; the monitor shows it, and "no GPU" on a CPU node.

No GPU exists on the machines that run these tests: NVML is mocked (a stand-in ``pynvml`` module
in ``sys.modules``) for the GPU path; the CPU path runs for real."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from tfos_notebook.notebook.view import RunView, TaskRow, format_gpus
from tfos_notebook.runtime.driver.events import GpuStats
from tfos_notebook.runtime.host.gpus import GpuStat, nvml_stats
from tfos_notebook.runtime.node.task.gpusampler import GpuSampler
from tfos_notebook.runtime.wire import messages as m

RUN = "20250101-000000-gpumap"


class _NVMLError(Exception):
    pass


def fake_pynvml(utilization: dict[int, int], used_mib: dict[int, int], total_mib: int = 16384):
    """A stand-in for nvidia-ml-py's ``pynvml`` with the GPUs in ``utilization``."""
    mod = types.ModuleType("pynvml")
    mod.NVMLError = _NVMLError
    mod.nvmlInit = lambda: None
    mod.nvmlShutdown = lambda: None

    def handle(i: int) -> int:
        if i not in utilization:
            raise _NVMLError(f"no GPU {i}")
        return i

    mod.nvmlDeviceGetHandleByIndex = handle
    mod.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=utilization[h], memory=0)
    mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=used_mib[h] << 20, total=total_mib << 20,
                                                                  free=0)
    return mod


class FakeConn:
    def __init__(self) -> None:
        self.sent: list[dict] = []
        self.got_two = threading.Event()

    def send(self, msg: dict) -> None:
        self.sent.append(msg)
        if len(self.sent) >= 2:
            self.got_two.set()


def test_nvml_stats_reads_utilisation_and_memory_of_the_assigned_gpus(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml({0: 87, 1: 5}, {0: 3174, 1: 12}))
    assert nvml_stats(["1"]) == [GpuStat("1", 5, 12, 16384)]
    assert nvml_stats(["0", "1"])[0] == GpuStat("0", 87, 3174, 16384)
    assert nvml_stats(["7"]) is None  # an address NVML does not know


def test_sampler_reports_every_interval_and_the_driver_decodes_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml({0: 87}, {0: 3174}))
    conn = FakeConn()
    sampler = GpuSampler(conn, ["0"], interval=0.05).start()
    try:
        assert conn.got_two.wait(5)
    finally:
        sampler.stop()
    report = m.decode(conn.sent[0])
    assert report == m.GpuReport(({"address": "0", "utilization": 87, "used_mib": 3174, "total_mib": 16384},))


def test_on_a_cpu_node_the_sampler_sends_nothing_and_the_monitor_says_no_gpu():
    conn = FakeConn()
    sampler = GpuSampler(conn, []).start()  # Spark assigned no GPU: nothing to sample
    sampler.stop()
    assert conn.sent == []
    assert format_gpus(TaskRow(0, "chief", 0)) == "no GPU"


def test_where_no_gpu_answers_nvml_gives_nothing():
    from gpuprobe import no_gpu_reason

    if not no_gpu_reason():
        pytest.skip("an NVIDIA GPU answers here: tests/runtime/host/test_real_gpu_holders.py reads it")
    assert nvml_stats(["0"]) is None  # no driver, or no nvidia-ml-py


def test_a_malformed_gpu_report_is_refused():
    with pytest.raises(Exception, match="malformed 'gpu_stats' message"):
        m.decode({"type": "gpu_stats", "gpus": [{"address": "0", "utilization": "high"}]})


def test_the_monitor_shows_each_gpu_with_its_utilisation_and_memory():
    view = RunView("r", RUN)
    view.apply(GpuStats(RUN, task=0, role="chief", index=0, host="h", gpus=(("0", 87, 3174, 16384),)))
    row = view.rows[0]
    assert format_gpus(row) == "0: 87% 3.1/16 GiB"
    row.gpus = ("0", "1")  # an address NVML has not reported yet shows alone
    assert format_gpus(row) == "0: 87% 3.1/16 GiB, 1"
