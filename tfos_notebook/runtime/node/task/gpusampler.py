"""A node's samplers: what its host's GPUs (and, while the run is logged to MLflow, its CPU and
memory) are doing, sent to the driver every few seconds.

Started by the node once its process is told to go, stopped when the process ends. NVML is read
through ``gpus.nvml_stats``; on a node without GPUs, or where NVML does not answer, the GPU sampler
sends nothing (the monitor then says "no GPU" or shows the addresses alone). CPU and memory are
read with psutil, host-wide, as MLflow's own system metrics are.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict

import psutil

from ...host.gpus import nvml_stats
from ...wire import channel
from ...wire import messages as m

log = logging.getLogger(__name__)

SAMPLE_SECS = 3.0


class Sampler:
    """Sends :meth:`sample` over ``conn`` every ``interval`` seconds on a thread of its own, until
    :meth:`stop` (or until ``sample`` returns None)."""

    name = "tfos-sampler"

    def __init__(self, conn: channel.Connection, interval: float = SAMPLE_SECS) -> None:
        self.conn, self.interval = conn, interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=self.name)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling; returns once the thread ended."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(self.interval + 5)

    def sample(self) -> m.Message | None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stopped.is_set():
            msg = self.sample()
            if msg is None:
                return
            try:
                self.conn.send(m.encode(msg))
            except OSError:  # the driver is gone: the node's supervisor handles that
                return
            self._stopped.wait(self.interval)


class GpuSampler(Sampler):
    """Sends a :class:`~.messages.GpuReport` for the GPUs at ``addresses``."""

    name = "tfos-gpu-sampler"

    def __init__(self, conn: channel.Connection, addresses: list[str], interval: float = SAMPLE_SECS) -> None:
        super().__init__(conn, interval)
        self.addresses = list(addresses)

    def start(self) -> GpuSampler:
        """Start sampling (nothing to sample on a node without GPUs)."""
        if self.addresses:
            super().start()
        return self

    def sample(self) -> m.GpuReport | None:
        stats = nvml_stats(self.addresses)
        if stats is None:
            log.info("NVML does not answer on this node: no GPU utilisation to report")
            return None
        return m.GpuReport(tuple(asdict(s) for s in stats))


class SystemSampler(Sampler):
    """Sends a :class:`~.messages.SystemReport`: the host's CPU utilisation since the last sample,
    and its memory in use."""

    name = "tfos-system-sampler"

    def start(self) -> SystemSampler:
        psutil.cpu_percent(interval=None)  # the first reading only starts the count
        return super().start()

    def sample(self) -> m.SystemReport:
        memory = psutil.virtual_memory()
        return m.SystemReport(cpu_percent=psutil.cpu_percent(interval=None), memory_used_mb=memory.used / 1e6,
                              memory_percent=memory.percent)
