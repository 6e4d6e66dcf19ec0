"""GPUs on this machine: which devices a process may see, and which processes hold which GPUs
(from NVML or ``nvidia-smi``'s CSV output).

Machine-readable formats only (``--query-*`` with ``--format=csv``): parsing the human table by
word position breaks on names such as "NVIDIA H100 80GB HBM3".
"""

from __future__ import annotations

import csv
import io
import logging
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError

log = logging.getLogger(__name__)


def visible_devices(addresses: list[str], inherited: str | None) -> list[str]:
    """The ``CUDA_VISIBLE_DEVICES`` entries of the GPUs at Spark's ``addresses``.

    Without an inherited ``CUDA_VISIBLE_DEVICES`` (``inherited`` None) the addresses are the
    devices. When the process already has one (``spark.executorEnv.CUDA_VISIBLE_DEVICES=10,11,12,13``,
    or the driver's own environment), the machine's usable GPUs are the ones it lists, and Spark's
    addresses are positions in that list: address 0 is device 10.

    Raises:
        ConfigError: an address is not a plain index into the inherited list, or is past its end.
    """
    if inherited is None or not addresses:
        return list(addresses)
    devices = [d.strip() for d in inherited.split(",") if d.strip()]
    found = []
    for address in addresses:
        if not address.isdigit() or (address != "0" and address.startswith("0")):
            raise ConfigError(
                f"Spark gave GPU address {address!r}, which cannot index CUDA_VISIBLE_DEVICES={inherited}: with "
                "CUDA_VISIBLE_DEVICES set, Spark's GPU addresses are positions in it; make the GPU discovery "
                "script report 0, 1, 2..., or unset CUDA_VISIBLE_DEVICES")
        if int(address) >= len(devices):
            raise ConfigError(
                f"Spark gave GPU address {address}, but CUDA_VISIBLE_DEVICES={inherited!r} lists {len(devices)} "
                "device(s): Spark's GPU addresses are positions in it; make it list every GPU the discovery script "
                "reports, or unset it")
        found.append(devices[int(address)])
    return found


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


@contextmanager
def _nvml() -> Iterator[Any]:
    """NVML initialised (the ``pynvml`` module of nvidia-ml-py), shut down after; None when it
    does not answer here (not installed, no driver)."""
    try:
        import pynvml  # optional: nvidia-ml-py
    except ImportError:
        yield None
        return
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        yield None
        return
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def _nvml_processes() -> list[GpuProcess] | None:
    with _nvml() as pynvml:
        if pynvml is None:
            return None
        found = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                found.append(GpuProcess(str(i), uuid, int(p.pid), int((p.usedGpuMemory or 0) // (1 << 20))))
        return found


@dataclass(frozen=True)
class GpuStat:
    """One GPU as NVML reads it: its ``address`` (index), utilisation in percent, memory in MiB."""

    address: str
    utilization: int
    used_mib: int
    total_mib: int


def nvml_stats(addresses: list[str]) -> list[GpuStat] | None:
    """Utilisation and memory of the GPUs at ``addresses`` (device indices, as Spark assigns them),
    or None when NVML does not answer here (no ``nvidia-ml-py``, no driver, a CPU node)."""
    with _nvml() as pynvml:
        if pynvml is None:
            return None
        try:
            found = []
            for address in addresses:
                handle = pynvml.nvmlDeviceGetHandleByIndex(int(address))
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
                rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
                found.append(GpuStat(address, int(rates.gpu), int(memory.used // (1 << 20)),
                                     int(memory.total // (1 << 20))))
            return found
        except (pynvml.NVMLError, ValueError) as e:  # a GPU NVML cannot read: no figures this time
            log.debug("NVML cannot read GPUs %s: %s", addresses, e)
            return None


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
    except (OSError, subprocess.SubprocessError) as e:  # nvidia-smi failed: GPU holders unknown here
        log.warning("nvidia-smi could not list GPU processes: %s", e)
        return None
    return parse_compute_apps(apps, parse_gpu_index(index))
