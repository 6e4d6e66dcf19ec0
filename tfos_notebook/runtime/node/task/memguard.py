"""A node's memory guard: the node's process (with what it started) and its host's memory, read
every second by the node's Spark task, reported to the driver, and held to a limit.

A node whose process grows without bound (a dataset cached or materialised whole, MLflow's
autologging of a repeated dataset, mlflow/mlflow#9600) would otherwise take its host down: on a
cluster the executor is killed by YARN or Kubernetes and relaunched into the same fate; in local
mode the notebook's own machine stalls. The guard ends the process group, with the reason, when:
- its resident memory passes the node's cap (``Run(memory_limit_mb=...)``, or Spark's own
  ``spark.executor.pyspark.memory``); or
- the host's available memory falls below its floor (``host_floor_mib``: a twentieth of the host, at
  least 256 MiB) while the process has been growing (``GROWING_MIB`` in ``GROWING_SECS``): the host
  is about to run out, and this process is among those taking it.
A resident-memory watchdog, not an address-space limit: TensorFlow reserves far more address space
than it uses, and fails under one.

It also tells a process the kernel's OOM killer ended (its cgroup's ``oom_kill`` count rose) from
one killed otherwise: both are out of memory, which the node reports as such.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections import deque

import psutil

from ...host.procs import kill_process_group
from ...wire import channel
from ...wire import messages as m
from ...wire.reports import host_floor_mib
from .gpusampler import Sampler

log = logging.getLogger(__name__)

SAMPLE_SECS = 1.0
GROWING_SECS = 5.0
GROWING_MIB = 64.0
MIB = 1 << 20


def node_cap(limit_mb: float) -> tuple[float, str]:
    """The cap (MiB) a node's process is held to, and what set it: the run's ``memory_limit_mb``,
    else Spark's ``spark.executor.pyspark.memory`` (which pyspark's worker hands its Python
    processes, ours included, as ``PYSPARK_EXECUTOR_MEMORY_MB``), else none (0)."""
    if limit_mb:
        return limit_mb, "the run's memory_limit_mb"
    spark_mb = os.environ.get("PYSPARK_EXECUTOR_MEMORY_MB", "")
    if spark_mb.isdigit() and int(spark_mb) > 0:
        return float(spark_mb), "spark.executor.pyspark.memory"
    return 0.0, ""


def cgroup_oom_kills(pid: int) -> int | None:
    """How many processes the kernel's OOM killer ended in the cgroup of process ``pid`` (cgroup v2's
    ``memory.events``), or None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            path = next(line.split(":", 2)[2].strip() for line in f if line.startswith("0::"))
        with open(f"/sys/fs/cgroup{path}/memory.events") as f:
            events = dict(line.split() for line in f if line.strip())
        return int(events.get("oom_kill", 0))
    except (OSError, StopIteration, ValueError):
        return None


def over_limit(rss_mib: float, cap_mib: float, available_mib: float, total_mib: float,
               grew_mib: float) -> str:
    """Why a process of ``rss_mib`` resident memory must be stopped now, or "" (a pure function):
    it is over its cap (0: none), or the host is below its floor while it grew ``grew_mib`` lately."""
    if cap_mib and rss_mib > cap_mib:
        return f"its memory reached {rss_mib:,.0f} MiB, over its cap of {cap_mib:,.0f} MiB"
    floor = host_floor_mib(total_mib)
    if available_mib < floor and grew_mib >= GROWING_MIB:
        return (f"its host was running out of memory ({available_mib:,.0f} MiB of {total_mib:,.0f} MiB available, "
                f"under the {floor:,.0f} MiB kept free) while it grew by {grew_mib:,.0f} MiB in "
                f"{GROWING_SECS:.0f} s, to {rss_mib:,.0f} MiB")
    return ""


def memory_stop(guard: MemoryGuard, exit_code: int) -> str:
    """Why the node's process ended for memory ("": it did not): its guard stopped it, or the
    kernel's OOM killer did (SIGKILL while the cgroup's OOM kills rose)."""
    if guard.reason:
        return guard.reason
    if exit_code == -signal.SIGKILL and guard.killed_by_kernel():
        return "the kernel's OOM killer ended it: its host (or its container) ran out of memory"
    return ""


class MemoryGuard(Sampler):
    """Watches the process ``proc`` (a node's child) until it ends: sends a
    :class:`~.messages.MemoryReport` over ``conn`` every ``SAMPLE_SECS`` and stops the process
    group when ``over_limit`` says so (``reason`` then says why). ``cap_mib``: the cap (0: none);
    ``cap_source``: what set it."""

    name = "tfos-memory-guard"

    def __init__(self, conn: channel.Connection, proc, cap_mib: float = 0.0, cap_source: str = "") -> None:
        super().__init__(conn, SAMPLE_SECS)
        self.proc, self.cap_mib, self.cap_source = proc, cap_mib, cap_source
        self.reason = ""
        self.oom_kills = cgroup_oom_kills(os.getpid())
        self._history: deque[tuple[float, float]] = deque()  # (time, rss MiB)

    def rss_mib(self) -> float | None:
        """The resident memory of the process and its descendants (None: it is gone)."""
        try:
            root = psutil.Process(self.proc.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return None
        total = 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:  # ended meanwhile
                continue
        return total / MIB

    def killed_by_kernel(self) -> bool:
        """Whether the kernel's OOM killer ended a process of the node's cgroup since the guard began."""
        now = cgroup_oom_kills(os.getpid())  # the node's child is in its task's cgroup
        return self.oom_kills is not None and now is not None and now > self.oom_kills

    def sample(self) -> m.MemoryReport | None:
        rss = self.rss_mib()
        if self.reason or rss is None or self.proc.poll() is not None:
            return None
        memory = psutil.virtual_memory()
        available, total = memory.available / MIB, memory.total / MIB
        now = time.monotonic()
        self._history.append((now, rss))
        while now - self._history[0][0] > GROWING_SECS:
            self._history.popleft()
        why = over_limit(rss, self.cap_mib, available, total, rss - self._history[0][1])
        if why:
            self.reason = why + (f" ({self.cap_source})" if "cap" in why and self.cap_source else "")
            log.warning("stopping the node's process: %s", self.reason)
            kill_process_group(self.proc, 0)
        return m.MemoryReport(rss_mib=rss, host_available_mib=available, host_total_mib=total, cap_mib=self.cap_mib)
