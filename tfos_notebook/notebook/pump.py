"""Carries a run's events to a view on a background thread, a few times a second.

The event stream calls subscribers on the publishing thread (the control server's); the pump only
queues there, and renders from its own thread at most every ``interval`` seconds, with every event
that arrived since the last render in one batch. With nothing new it still renders every ``tick``
seconds (elapsed time moves). It stops after the batch that holds the run's end.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from ..runtime.driver.events import Event, EventStream, RunFinished
from .frontend import OutputTarget

log = logging.getLogger(__name__)

_CLOSE = object()


class EventPump:
    """Delivers ``events`` to ``render(batch)`` on a thread of its own.

    Args:
        events: the run's event stream (replayed from its start).
        render: called with each batch (possibly empty) inside ``target.active()``.
        target: the cell the thread writes to.
        interval: least seconds between two renders.
        tick: most seconds between two renders while the run goes on.
    """

    def __init__(self, events: EventStream, render: Callable[[list[Event]], None], target: OutputTarget,
                 interval: float = 0.25, tick: float = 1.0, name: str = "tfos-monitor") -> None:
        self.render, self.target = render, target
        self.interval, self.tick = interval, tick
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._unsubscribe = events.subscribe(self._queue.put, replay=True)
        self._thread.start()

    def _batch(self, last_render: float) -> tuple[list[Event], bool]:
        try:
            first = self._queue.get(timeout=self.tick)
        except queue.Empty:
            return [], False
        if first is _CLOSE:
            return [], True
        pause = self.interval - (time.monotonic() - last_render)
        if pause > 0:
            time.sleep(pause)
        batch = [first]
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return batch, False
            if item is _CLOSE:
                return batch, True
            batch.append(item)

    def _run(self) -> None:
        last = 0.0
        while True:
            batch, closed = self._batch(last)
            last = time.monotonic()
            try:
                with self.target.active():
                    self.render(batch)
            except Exception:  # a broken view must not take the pump down with it
                log.exception("monitor update failed")
            if closed or any(isinstance(e, RunFinished) for e in batch):
                self._unsubscribe()
                return

    def close(self) -> None:
        """Stop delivering (what is queued is rendered first)."""
        self._queue.put(_CLOSE)

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the pump rendered the run's end; True when it did."""
        self._thread.join(timeout)
        return not self._thread.is_alive()
