"""Helpers for runtime tests: the process table and waiting for a condition."""

from __future__ import annotations

import os
import time

import psutil

CHILD_MODULE = "tfos_notebook.runtime.node.child.main"


def child_processes(run_id: str) -> list[psutil.Process]:
    """Node child processes of one run still alive anywhere on this machine (the cluster's
    executors run here too), spawned or forked: a node's process works in the node's work folder
    (``tfos-RUN_ID-TASK-...``), and its command line names the child module where it was spawned
    (a forked one's is its worker's)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if os.path.basename(p.cwd()).startswith(f"tfos-{run_id}-") and (
                    CHILD_MODULE in (p.info["cmdline"] or []) or "TFOS_RUN_ID" not in p.environ()):
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def child_role(proc: psutil.Process) -> str:
    """The node (``worker:0``) whose child process ``proc`` is (``orphans.run_marks``: from its
    environment, or from its node's record of it where it was forked)."""
    from tfos_notebook.runtime.host.orphans import run_marks

    return run_marks(proc).task


def eventually(predicate, timeout: float = 15.0) -> bool:
    """Whether ``predicate()`` becomes true within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False
