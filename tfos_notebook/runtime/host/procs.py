"""Stopping a process group: SIGTERM, a grace period, then SIGKILL (first asking a node's child
where it was, when the run failed elsewhere); and lowering a thread's CPU
priority, for work on the driver that must never slow training down.

A node's child, a TensorBoard and the development cluster's daemons each run in a process group of
their own (``start_new_session=True``), so that stopping the group takes everything they started
with them.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable

from .watchdog import STACKS_SIGNAL

log = logging.getLogger(__name__)


def kill_group(pgid: int, grace: float, exited: Callable[[float], bool]) -> bool:
    """Stop process group ``pgid``: SIGTERM, and SIGKILL if it has not exited ``grace`` seconds later.

    Args:
        pgid: the group's id (the pid of the process that started it with ``start_new_session``).
        grace: seconds to wait after each signal.
        exited: ``exited(seconds)`` waits at most ``seconds`` for the group's processes to end and
            says whether they did.

    Returns:
        Whether they ended (False: they outlived SIGKILL by ``grace``, e.g. stuck in the kernel).
        A group that is already gone, or not ours to signal, is only waited for.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:  # the group is gone already: only the wait is left
            pass
        except PermissionError as e:  # not ours to signal (its pid reused by another user's process)
            log.warning("process group %s cannot be signalled: %s", pgid, e)
        if exited(grace):
            return True
    return False


def kill_process_group(proc: subprocess.Popen, grace: float) -> int | None:
    """Stop the process group that ``proc`` started (see :func:`kill_group`) and reap ``proc``.

    Returns:
        ``proc``'s exit code (negative: the signal that ended it), or None if it outlived SIGKILL.
    """
    if proc.poll() is None:
        kill_group(proc.pid, grace, lambda seconds: _waited(proc, seconds))
    return proc.poll()


STACKS_SECS = 0.2  # for the stacks to be written (at once, by a signal handler in C) before the child is stopped


def dump_stacks(proc: subprocess.Popen) -> None:
    """Have ``proc`` (a node's child, which registers ``faulthandler`` for ``STACKS_SIGNAL``) write
    where each of its threads is to its stderr, which reaches the run's log, before it is stopped."""
    if proc.poll() is None:
        try:
            os.kill(proc.pid, STACKS_SIGNAL)
        except OSError as e:  # gone meanwhile
            log.debug("no stacks from %s: %s", proc.pid, e)
            return
        _waited(proc, STACKS_SECS)


def _waited(proc: subprocess.Popen, seconds: float) -> bool:
    try:
        proc.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


NICE_INCREMENT = 10


def lower_thread_priority() -> None:
    """Lower the calling thread's CPU priority by ``NICE_INCREMENT`` (Linux nices threads one by one;
    TensorFlow's thread pools, created by the first thread that runs an op, inherit it). Where that
    is not possible (not Linux, not allowed) the thread runs at its normal priority."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + NICE_INCREMENT))
    except (AttributeError, OSError):
        pass
