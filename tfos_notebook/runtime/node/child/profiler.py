"""Profiler traces of the running function, captured inside the node's child on the driver's order.

The node writes each ``Profile`` order it gets over the control channel as one JSON line to a pipe
of the child (``orders.py``; TensorFlow's profiler server is never started); a thread of the child starts
TensorFlow's profiler in-process (``tf.profiler.experimental.start``), lets the training run for the
asked seconds or steps, stops it, and moves the trace to
``<dir>/plugins/profile/<session>/<node>.xplane.pb``, complete, for the node to ship to the
driver's TensorBoard mirror. Then it says so with a ``ProfileDone`` on the status pipe.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

from ...host.paths import trace_path
from ...wire.messages import ProfileDone
from .pace import Pace

log = logging.getLogger(__name__)

MAX_STEPS_WAIT_SECS = 120.0  # a profile of K steps ends after this long however few steps ran


def capture(order: dict, pace: Pace | None, node: str, emit: Callable[[ProfileDone], None]) -> None:
    """Carry out one order (``session``, ``seconds`` or ``steps``, ``dir``) and report it."""
    session = order["session"]
    if "tensorflow" not in sys.modules:
        emit(ProfileDone(session, False, f"{node} has not imported TensorFlow: its function runs no "
                                         "TensorFlow to profile"))
        return
    import tensorflow as tf

    # beside the shipped directory, on the same filesystem: only the finished trace is moved into it
    scratch = tempfile.mkdtemp(prefix="tfos-profile-", dir=os.path.dirname(order["dir"].rstrip("/")))
    try:
        try:
            tf.profiler.experimental.start(scratch)
        except Exception as e:  # another profile (the user's own, or Keras's profile_batch) is running
            emit(ProfileDone(session, False, f"{node} could not start TensorFlow's profiler: {e}"))
            return
        try:
            _wait(order, pace)
        finally:
            tf.profiler.experimental.stop()
        traces = glob.glob(os.path.join(scratch, "plugins", "profile", "*", "*.xplane.pb"))
        if not traces:
            emit(ProfileDone(session, False, f"{node}: TensorFlow's profiler wrote no trace"))
            return
        target = trace_path(order["dir"], session, node)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(traces[0], target)  # complete before the shipper sees it
        emit(ProfileDone(session, True, f"{os.path.getsize(target)} bytes"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _wait(order: dict, pace: Pace | None) -> None:
    steps = int(order.get("steps") or 0)
    if steps <= 0 or pace is None:
        time.sleep(float(order.get("seconds") or 0.0))
        return
    until, deadline = pace.steps + steps, time.monotonic() + MAX_STEPS_WAIT_SECS
    while pace.steps < until and time.monotonic() < deadline:
        time.sleep(0.01)

