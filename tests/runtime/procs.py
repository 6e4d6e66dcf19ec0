"""Helpers for runtime tests: the process table and waiting for a condition."""

from __future__ import annotations

import time

import psutil


def child_processes(run_id: str) -> list[psutil.Process]:
    """Node child processes of one run still alive anywhere on this machine (the cluster's
    executors run here too)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "tfos_notebook.runtime.node.child" in cmd and run_id in cmd:
            found.append(p)
    return found


def child_task(proc: psutil.Process) -> int:
    """The task number of a node's child process (``... child STATUS_FD NODE_PID RUN_ID TASK ...``)."""
    cmd = proc.cmdline()
    return int(cmd[cmd.index("tfos_notebook.runtime.node.child") + 4])


def eventually(predicate, timeout: float = 15.0) -> bool:
    """Whether ``predicate()`` becomes true within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False
