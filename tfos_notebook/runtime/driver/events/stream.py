"""The stream that carries a run's events (see :mod:`.events`) to its subscribers, bounded and
replayable."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from .types import Event, GpuStats, Log, MlflowCalled, NodeMemory, Pace, Step, SystemStats

log = logging.getLogger(__name__)


def _deliver(callback: Callable[[Event], None], event: Event) -> None:
    try:
        callback(event)
    except Exception:  # a broken view must not break the run
        log.warning("an event subscriber (%r) failed on %s", callback, type(event).__name__, exc_info=True)


class EventStream:
    """A thread-safe, replayable stream of events with subscribers.

    State events are all kept; log lines are kept up to ``max_logs``, and steps (with the paces),
    system samples, relayed MLflow calls and the nodes' GPU and memory readings up to ``max_steps`` each (the oldest dropped), so a
    chatty run cannot grow the driver's memory without bound.
    Subscribers see every event as it is published; they are called on the publishing thread and
    must be quick; an exception in one is logged and cannot break the run.
    """

    def __init__(self, max_logs: int = 5000, max_steps: int = 10000) -> None:
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._logs: deque[Log] = deque(maxlen=max_logs)
        self._steps: deque[Step | Pace] = deque(maxlen=max_steps)
        self._samples: deque[Event] = deque(maxlen=max_steps)  # SystemStats, MlflowCalled
        self._gauges: deque[Event] = deque(maxlen=max_steps)  # GpuStats, NodeMemory: each node's, every few seconds
        self._subscribers: list[Callable[[Event], None]] = []
        self._changed = threading.Condition(self._lock)

    def publish(self, event: Event) -> None:
        with self._lock:
            if isinstance(event, Log):
                self._logs.append(event)
            elif isinstance(event, (Step, Pace)):  # a node's progress: bounded like steps
                self._steps.append(event)
            elif isinstance(event, (SystemStats, MlflowCalled)):
                self._samples.append(event)
            elif isinstance(event, (GpuStats, NodeMemory)):
                self._gauges.append(event)
            else:
                self._events.append(event)
            subscribers = list(self._subscribers)
            self._changed.notify_all()
        for callback in subscribers:
            _deliver(callback, event)

    def subscribe(self, callback: Callable[[Event], None], replay: bool = True) -> Callable[[], None]:
        """Call ``callback`` for every event (first the past ones when ``replay``); returns an
        unsubscribe function."""
        with self._lock:
            past = self._merged() if replay else []
            self._subscribers.append(callback)
        for event in past:
            _deliver(callback, event)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def events(self, kind: type | None = None) -> list[Event]:
        """All kept events (logs and steps merged in time order), optionally only those of one type."""
        with self._lock:
            if kind is Log:
                return list(self._logs)
            if kind in (Step, Pace):
                return [e for e in self._steps if isinstance(e, kind)]
            merged = self._merged()
        return [e for e in merged if kind is None or isinstance(e, kind)]

    def _merged(self) -> list[Event]:
        """Every kept event in time order (the lock held)."""
        return sorted([*self._events, *self._logs, *self._steps, *self._samples, *self._gauges], key=lambda e: e.t)

    def wait_for(self, predicate: Callable[[list[Event]], bool], timeout: float | None = None) -> bool:
        """Block until ``predicate(state events)`` (neither logs nor steps) is true or ``timeout`` passes."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self._events), timeout)
