"""The probe job a Spark Connect backend runs to see its executors (``connect.py``): each task
tells its host, cores, GPU addresses and versions, and whether it can open a connection to the
driver host, where a :class:`ReachListener` waits."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ...wire.barrier import gpu_addresses
from .backend import ExecutorInfo

#: How long a probe task waits to connect to the driver host before calling it unreachable.
REACH_TIMEOUT = 3.0
PROBE_DDL = "host string, cores long, gpus array<string>, python string, tensorflow string, reach string"


@dataclass(frozen=True)
class Probe:
    """What the probe job saw: one entry per executor host, and the errors of tasks that could
    not reach the driver host (empty when all could)."""

    executors: tuple[ExecutorInfo, ...]
    unreachable: tuple[str, ...]
    versions: tuple[tuple[str, str, str], ...]
    at: float

    @classmethod
    def of(cls, rows: list) -> Probe:
        """The probe that the probe job's rows (``PROBE_DDL``) tell, one executor per host."""
        by_host: dict[str, ExecutorInfo] = {}
        for r in rows:
            known = by_host.get(r.host)
            gpus = tuple(sorted(set(r.gpus or ()) | set(known.gpus if known else ())))
            by_host[r.host] = ExecutorInfo(r.host, r.host, int(r.cores), gpus)
        unreachable = tuple(sorted({r.reach for r in rows if r.reach}))
        versions = tuple(sorted({(r.host, r.python, r.tensorflow) for r in rows}))
        return cls(tuple(by_host.values()), unreachable, versions, time.monotonic())


class ProbeTask:
    """The body of each probe task: this host's name, cores, GPU addresses, Python and TensorFlow
    versions, and whether it can connect to ``(host, port)`` on the driver ("" when it can)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port

    def __call__(self, batches: Iterator) -> Iterator:
        import os

        import pyarrow as pa
        from pyspark import TaskContext

        from ...host.versions import installed_versions

        for _ in batches:
            pass
        gpus = gpu_addresses(TaskContext.get())
        versions = installed_versions()  # tensorflow-cpu and the other builds count too
        try:
            with socket.create_connection((self.host, self.port), timeout=REACH_TIMEOUT):
                reach = ""
        except OSError as e:
            reach = f"{socket.gethostname()}: {type(e).__name__}: {e}"
        yield pa.RecordBatch.from_pylist([{
            "host": socket.gethostname(), "cores": os.cpu_count() or 1, "gpus": gpus,
            "python": versions["python"], "tensorflow": versions["tensorflow"], "reach": reach}])


class ReachListener:
    """A TCP listener on the driver host that accepts and closes connections (the probe's target)."""

    def __init__(self, host: str) -> None:
        self.sock = socket.create_server((host, 0))
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True, name="tfos-reach-probe")
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            conn.close()

    def close(self) -> None:
        self.sock.close()
        self._thread.join(2)
