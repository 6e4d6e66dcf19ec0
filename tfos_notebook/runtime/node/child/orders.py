"""The orders a node passes to its child process, one JSON line each on a pipe (no port): profile
captures (``profiler.capture``), one at a time on a thread of their own since each lasts seconds,
and the decommission checkpoint's orders (``savepoint.SavePoint.order``), handled as they come."""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable

from ...wire.messages import ProfileDone
from .pace import Pace
from .profiler import capture
from .savepoint import SavePoint

log = logging.getLogger(__name__)


def follow_orders(stream, pace: Pace | None, node: str, emit: Callable[[ProfileDone], None],
                  savepoint: SavePoint) -> threading.Thread:
    """Read the orders on ``stream`` (the node's pipe) on a daemon thread until it closes."""
    profiles: queue.SimpleQueue[dict | None] = queue.SimpleQueue()

    def profile_loop() -> None:
        for order in iter(profiles.get, None):
            try:
                capture(order, pace, node, emit)
            except OSError as e:  # the status pipe closed: the node is gone
                log.debug("profile orders stop: %s", e)
                return
            except Exception as e:  # a failed capture must never break the training
                log.warning("a profile order failed", exc_info=True)
                emit(ProfileDone(order["session"], False, f"{node}: the profile failed: {e}"))

    def loop() -> None:
        threading.Thread(target=profile_loop, daemon=True, name="tfos-profile-orders").start()
        for line in iter(stream.readline, ""):
            order = json.loads(line)  # written by our own node
            if order["kind"] == "profile":
                profiles.put(order)
                continue
            try:
                savepoint.order(order)
            except OSError as e:  # the status pipe closed: the node is gone
                log.debug("orders stop: %s", e)
                break
        profiles.put(None)

    thread = threading.Thread(target=loop, daemon=True, name="tfos-orders")
    thread.start()
    return thread
