"""Which processes hold which GPUs on this machine, from NVML or ``nvidia-smi``'s CSV output.

Machine-readable formats only (``--query-*`` with ``--format=csv``): parsing the human table by
word position breaks on names such as "NVIDIA H100 80GB HBM3".
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuProcess:
    """A process using GPU memory: ``gpu`` is the device index, ``used_mib`` its memory."""

    gpu: str
    uuid: str
    pid: int
    used_mib: int


def parse_gpu_index(csv_text: str) -> dict[str, str]:
    """``nvidia-smi --query-gpu=index,uuid --format=csv,noheader`` -> {uuid: index}."""
    out = {}
    for row in csv.reader(io.StringIO(csv_text)):
        if len(row) >= 2:
            out[row[1].strip()] = row[0].strip()
    return out


def parse_compute_apps(csv_text: str, index_by_uuid: dict[str, str]) -> list[GpuProcess]:
    """``nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits``."""
    found = []
    for row in csv.reader(io.StringIO(csv_text)):
        if len(row) < 3:
            continue
        uuid, pid, used = (c.strip() for c in row[:3])
        try:
            found.append(GpuProcess(index_by_uuid.get(uuid, uuid), uuid, int(pid), int(float(used))))
        except ValueError:
            continue  # "[N/A]" and the like
    return found


def _nvml_processes() -> list[GpuProcess] | None:
    try:
        import pynvml  # optional: nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        found = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                found.append(GpuProcess(str(i), uuid, int(p.pid), int((p.usedGpuMemory or 0) // (1 << 20))))
        return found
    finally:
        pynvml.nvmlShutdown()


def gpu_processes(timeout: float = 10.0) -> list[GpuProcess] | None:
    """Processes holding GPU memory here, or None when this machine has no NVIDIA tooling."""
    found = _nvml_processes()
    if found is not None:
        return found
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        index = subprocess.run([smi, "--query-gpu=index,uuid", "--format=csv,noheader"], capture_output=True,
                               text=True, timeout=timeout, check=True).stdout
        apps = subprocess.run([smi, "--query-compute-apps=gpu_uuid,pid,used_memory",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True,
                              timeout=timeout, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_compute_apps(apps, parse_gpu_index(index))
