"""A node's GPU sampler: utilisation and memory of its GPUs, sent to the driver every few seconds.

Started by the node once its process is told to go, stopped when the process ends. NVML is read
through ``gpus.nvml_stats``; on a node without GPUs, or where NVML does not answer, it sends
nothing (the monitor then says "no GPU" or shows the addresses alone).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict

from ..wire import channel
from ..wire import messages as m
from ..wire.gpus import nvml_stats

log = logging.getLogger(__name__)

SAMPLE_SECS = 3.0


class GpuSampler:
    """Sends a :class:`~.messages.GpuReport` over ``conn`` every ``interval`` seconds for the GPUs
    at ``addresses``, until :meth:`stop` (or until NVML stops answering)."""

    def __init__(self, conn: channel.Connection, addresses: list[str], interval: float = SAMPLE_SECS) -> None:
        self.conn, self.addresses, self.interval = conn, list(addresses), interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="tfos-gpu-sampler")

    def start(self) -> GpuSampler:
        """Start sampling (nothing to sample on a node without GPUs)."""
        if self.addresses:
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling; returns once the thread ended."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(self.interval + 5)

    def _run(self) -> None:
        while not self._stopped.is_set():
            stats = nvml_stats(self.addresses)
            if stats is None:
                log.info("NVML does not answer on this node: no GPU utilisation to report")
                return
            try:
                self.conn.send(m.encode(m.GpuReport(tuple(asdict(s) for s in stats))))
            except OSError:  # the driver is gone: the node's supervisor handles that
                return
            self._stopped.wait(self.interval)
