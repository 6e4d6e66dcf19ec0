"""Leftovers on the whole cluster (``tfos_notebook.cleanup``, ``%tfos_cleanup``): one barrier task
per slot scans its host (``host/orphans.py``), and the driver scans its own."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from ...host.orphans import Leftover, address_towards, scan_host
from ..spark import backend_for


class _ScanTask:
    """The body of each task of the leftover scan: this host's leftovers, as dicts."""

    def __init__(self, exclude_runs: list[str], kill: bool, driver_host: str) -> None:
        self.exclude_runs, self.kill, self.driver_host = exclude_runs, kill, driver_host

    def __call__(self, _partition: int, _gpus: list[str]) -> dict:
        found = scan_host(set(self.exclude_runs), self.kill, address=address_towards(self.driver_host))
        return {"leftovers": [asdict(x) for x in found]}

def scan_cluster(spark: Any, exclude_runs: set[str] | frozenset[str] = frozenset(), kill: bool = False,
                 timeout: float = 60.0) -> list[Leftover]:
    """Leftovers on every executor host (and the driver's): one barrier task per slot, so every
    executor runs one. Exported as ``tfos_notebook.cleanup(sc, kill=True)``.

    Args:
        spark: a SparkContext, a classic SparkSession or a ``SparkBackend``.
        exclude_runs: active runs whose processes must be left alone (runs with a live node on a
            host are left alone anyway).
        kill: terminate the leftovers of our runs (foreign GPU holders are only reported).

    Raises ``TimeoutError`` when the slots are busy for longer than ``timeout``."""
    backend = backend_for(spark)
    slots = max(1, backend.cluster().total_slots)
    driver_host = backend.driver_host()
    task = _ScanTask(sorted(exclude_runs), kill, driver_host)
    job = backend.submit(f"tfos-cleanup-{time.time_ns()}", "tfos_notebook leftover scan",
                         lambda: backend.barrier(slots, task))
    if not job.join(timeout):
        job.cancel()
        raise TimeoutError(f"the leftover scan did not get {slots} free slots within {timeout:.0f}s")
    rows = [row for answer in job.result() for row in answer["leftovers"]]
    local = [asdict(x) for x in scan_host(exclude_runs, kill, address=driver_host)]
    unique = {(r["host"], r["pid"]): r for r in [*rows, *local]}
    return [Leftover(**{**r, "gpus": tuple(r["gpus"])}) for r in unique.values()]
