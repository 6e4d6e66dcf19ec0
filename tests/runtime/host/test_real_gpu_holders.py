"""On a machine with a real NVIDIA GPU, without Spark or TensorFlow: what a node's leftover scan
and the cleanup read of the GPU (``host/gpus.py``, ``host/orphans.py``) against the real driver.

A process that holds GPU memory is started with a CUDA library the host already has (PyTorch or
CuPy), once marked as a node of a run that is gone (``TFOS_RUN_ID``) and once unmarked (a foreign
holder). NVML and ``nvidia-smi``'s CSV must both name it with its memory; the scan must call the
first a leftover and kill it, report the second as foreign and leave it alone; and the memory must
be free once the leftover is gone. Skipped, with the reason, where no GPU answers (CI never has
one). Needs only psutil and pytest besides the package, so it runs on a GPU host that has neither
Spark nor Java: ``python -m pytest --noconftest -p no:cacheprovider tests/runtime/host/test_real_gpu_holders.py``."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time

import pytest

from tfos_notebook.runtime.host import gpus, orphans

pytestmark = pytest.mark.gpu

HOLD_MIB = 512
HOLDERS = {  # module -> a program that takes HOLD_MIB of GPU memory, says so, and waits
    "torch": f"import torch,time; x=torch.empty({HOLD_MIB}<<20, dtype=torch.uint8, device='cuda'); "
             "torch.cuda.synchronize(); print('held', flush=True); time.sleep(600)",
    "cupy": f"import cupy,time; x=cupy.empty({HOLD_MIB}<<20, dtype=cupy.uint8); cupy.cuda.Device().synchronize(); "
            "print('held', flush=True); time.sleep(600)",
}


def _holder_program() -> str | None:
    return next((program for module, program in HOLDERS.items() if importlib.util.find_spec(module)), None)


if shutil.which("nvidia-smi") is None or gpus.gpu_processes() is None:
    pytest.skip("no NVIDIA GPU answers here (nvidia-smi / NVML)", allow_module_level=True)
if _holder_program() is None:
    pytest.skip("no CUDA library (torch or cupy) to hold GPU memory with", allow_module_level=True)


@pytest.fixture
def holder():
    """Start a GPU-holding process with ``env`` added; yields a starter, kills what it started."""
    started = []

    def start(**env: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", _holder_program()], env={**os.environ, **env},
                                stdout=subprocess.PIPE, text=True)
        started.append(proc)
        assert proc.stdout.readline().strip() == "held", "the holder could not take GPU memory"
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def eventually(check, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.5)


def by_pid(found, pid: int):
    return [p for p in found if p.pid == pid]


def test_nvml_and_nvidia_smi_both_name_a_holder_with_its_memory(holder, monkeypatch):
    proc = holder()
    nvml = eventually(lambda: by_pid(gpus.gpu_processes() or [], proc.pid))
    assert nvml, f"NVML does not list pid {proc.pid}: {gpus.gpu_processes()}"
    assert nvml[0].used_mib >= HOLD_MIB and nvml[0].gpu.isdigit() and nvml[0].uuid.startswith("GPU-")
    monkeypatch.setattr(gpus, "_nvml_processes", lambda: None)  # the nvidia-smi CSV path, as without nvidia-ml-py
    smi = by_pid(gpus.gpu_processes() or [], proc.pid)
    assert [(p.gpu, p.uuid) for p in smi] == [(p.gpu, p.uuid) for p in nvml] and smi[0].used_mib >= HOLD_MIB
    [stat] = gpus.nvml_stats([nvml[0].gpu])
    assert stat.used_mib >= HOLD_MIB and stat.total_mib > stat.used_mib and 0 <= stat.utilization <= 100


def test_a_gone_runs_process_on_the_gpu_is_a_leftover_killed_and_a_foreign_one_is_left_alone(holder):
    leftover = holder(TFOS_RUN_ID="run-that-is-gone", TFOS_TASK="worker:0")
    foreign = holder()
    found = eventually(lambda: [f for f in orphans.scan_host() if f.pid in (leftover.pid, foreign.pid) and f.gpus])
    mine = {f.pid: f for f in found}
    assert set(mine) == {leftover.pid, foreign.pid}, found
    assert mine[leftover.pid].run_id == "run-that-is-gone" and mine[leftover.pid].task == "worker:0"
    assert mine[leftover.pid].used_mib >= HOLD_MIB and mine[foreign.pid].foreign

    killed = {f.pid: f for f in orphans.scan_host(kill=True)}
    assert killed[leftover.pid].killed and not killed[foreign.pid].killed
    assert leftover.wait(10) is not None and foreign.poll() is None
    assert eventually(lambda: not by_pid(gpus.gpu_processes() or [], leftover.pid)), "its GPU memory is still held"
    assert by_pid(gpus.gpu_processes() or [], foreign.pid)
