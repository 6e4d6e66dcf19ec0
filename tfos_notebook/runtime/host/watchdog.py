"""A process that dies with its parent: a node's child (whose parent is the node's Python worker)
and a TensorBoard (whose parent is the kernel that owns it) each watch theirs. The driver waits
``WATCHDOG_SECS`` twice over for a lost node's child to be gone. On ``STACKS_SIGNAL`` from its node,
a child writes its threads' Python stacks to its stderr (``procs.dump_stacks``)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

WATCHDOG_SECS = 0.5  # how often the child checks that its node is alive
STACKS_SIGNAL = signal.SIGUSR1


def watch_parent(parent: int, interval: float = WATCHDOG_SECS, orphaned: Callable[[], None] | None = None) -> None:
    """Kill this process and its whole process group as soon as ``parent`` is no longer its parent
    (it died), after ``orphaned()``: what the parent would have cleaned up. Run it on a daemon
    thread of a process started with ``start_new_session=True``."""
    while os.getppid() == parent:
        time.sleep(interval)  # polling: nothing tells a process that its parent died
    if orphaned is not None:
        orphaned()
    os.killpg(0, signal.SIGKILL)
