"""One ``Deadline`` handed to every bounded wait, instead of a hand-written deadline loop in each."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Deadline:
    """A point in monotonic time ``seconds`` from now (None: never).

    ``wait_until(predicate)`` polls ``predicate`` until it is true, the deadline passes, or
    ``stop`` is set; ``sleep(s)`` sleeps at most until the deadline (or ``stop``)."""

    def __init__(self, seconds: float | None, stop: threading.Event | None = None) -> None:
        self.seconds = seconds
        self.at = None if seconds is None else time.monotonic() + seconds
        self.stop = stop

    def remaining(self) -> float | None:
        """Seconds left (never negative), or None for no deadline."""
        return None if self.at is None else max(0.0, self.at - time.monotonic())

    @property
    def expired(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at

    @property
    def stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def sleep(self, seconds: float) -> bool:
        """Sleep ``seconds`` at most until the deadline; False once stopped or expired."""
        left = self.remaining()
        seconds = seconds if left is None else min(seconds, left)
        if self.stop is not None:
            self.stop.wait(seconds)
        elif seconds > 0:
            time.sleep(seconds)
        return not (self.stopped or self.expired)

    def wait_until(self, predicate: Callable[[], bool], interval: float = 0.05) -> bool:
        """Poll ``predicate`` every ``interval`` seconds; whether it came true before the deadline
        (or ``stop``)."""
        while not predicate():
            if self.stopped or self.expired:
                return False
            self.sleep(interval)
        return True
