"""How a run goes, from its nodes' ``Pace`` events: progress, throughput, ETA, and the findings
about nodes that hold the run back (stragglers) or wait for their data (input-bound); and, from
their ``NodeMemory`` events, about nodes whose memory grows toward its limit (``memory.py``).

A :class:`PaceBoard` folds the ``Pace`` events (the nodes measure; the driver only adds up) and
answers :meth:`PaceBoard.progress`; the monitor, the text lines and the runs registry each keep
one. :class:`Insight` is the run's own consumer of its event stream, like the registry's
tracker: it publishes the findings of ``pace.py`` once per node. Pure Python, no Spark.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..events import Event, EventStream, LaunchSubmitted, NodeMemory, Pace
from ..events.finding import Finding
from .memory import MemoryBoard
from .pace import WINDOW_REPORTS, NodeWindow, input_bound_findings, straggler_findings

RECENT_REPORTS = WINDOW_REPORTS  # the reports (about seconds) the current rates are taken over


@dataclass(frozen=True)
class NodeProgress:
    """One node's pace: current rates (``None`` before it reported), totals and how far it is."""

    name: str
    host: str
    steps: int
    examples: int
    steps_per_sec: float
    examples_per_sec: float
    step_secs: float
    wait_share: float | None  # of its time spent waiting for fed data; None: not measured
    done: int  # steps done of ``planned`` (0: unknown)
    planned: int
    epoch: int
    epochs: int
    epoch_step: int
    epoch_steps: int

    @property
    def fraction(self) -> float | None:
        return min(1.0, self.done / self.planned) if self.planned else None


@dataclass(frozen=True)
class Progress:
    """The run's pace: per node, and for the run (while it goes on over the last reports, once it
    ended over its whole time): ``steps_per_sec`` is the slowest node's (under a synchronous
    strategy every node takes the same steps), ``examples_per_sec`` the nodes' sum. ``fraction``
    and ``eta`` (seconds) come from the node furthest behind, where the nodes say how far they are."""

    nodes: tuple[NodeProgress, ...]
    steps_per_sec: float
    examples_per_sec: float
    fraction: float | None
    eta: float | None
    ended: bool = False

    @property
    def behind(self) -> NodeProgress | None:
        """The node furthest behind among those that know how far they are."""
        known = [n for n in self.nodes if n.fraction is not None]
        return min(known, key=lambda n: n.fraction) if known else None


class _NodeWindow:
    def __init__(self, first: Pace) -> None:
        self.last = first
        self.reports = 0
        self.recent: deque[Pace] = deque(maxlen=RECENT_REPORTS)
        self.active_secs = 0.0


class PaceBoard:
    """The ``Pace`` events of one attempt of a run, folded per node."""

    def __init__(self) -> None:
        self._nodes: dict[int, _NodeWindow] = {}

    def add(self, e: Pace) -> None:
        node = self._nodes.get(e.task)
        if node is None:
            node = self._nodes[e.task] = _NodeWindow(e)
        node.last = e
        node.recent.append(e)
        node.reports += 1
        node.active_secs += e.secs

    def reset(self) -> None:
        """A relaunch: the nodes count from zero again."""
        self._nodes.clear()

    def __bool__(self) -> bool:
        return bool(self._nodes)

    def windows(self) -> list[NodeWindow]:
        """What ``pace.py`` judges: each node's recent reports, but its first, which spans its
        start-up too (its imports, the strategy, tracing the first step)."""
        return [NodeWindow(n.last.name, n.last.host, tuple(n.recent)[1 if n.reports <= RECENT_REPORTS else 0:])
                for _, n in sorted(self._nodes.items())]

    def progress(self, ended: bool = False) -> Progress:
        """The run's pace now (``ended``: the totals over its whole time)."""
        nodes = tuple(self._node(n, ended) for _, n in sorted(self._nodes.items()))
        known = [n for n in nodes if n.fraction is not None]
        behind = min(known, key=lambda n: n.fraction) if known else None
        eta = None
        if behind is not None and not ended:
            eta = (behind.planned - behind.done) / behind.steps_per_sec if behind.steps_per_sec else None
        return Progress(nodes, min((n.steps_per_sec for n in nodes), default=0.0),
                        sum(n.examples_per_sec for n in nodes), behind.fraction if behind is not None else None,
                        eta, ended)

    @staticmethod
    def _node(n: _NodeWindow, ended: bool) -> NodeProgress:
        e = n.last
        window = list(n.recent)
        secs = sum(p.secs for p in window)
        if ended:  # the totals over the time it was busy
            steps_rate = e.steps / n.active_secs if n.active_secs else 0.0
            examples_rate = e.examples / n.active_secs if n.active_secs else 0.0
        else:
            steps_rate = sum(p.window_steps for p in window) / secs if secs else 0.0
            examples_rate = sum(p.window_examples for p in window) / secs if secs else 0.0
        timed = [p.step_secs for p in window if p.step_secs > 0]
        waits = [p for p in window if p.input_measured]
        wait_share = sum(p.wait_secs for p in waits) / sum(p.secs for p in waits) if waits else None
        if e.epochs and e.epoch_steps:
            done, planned = e.epoch * e.epoch_steps + e.epoch_step, e.epochs * e.epoch_steps
        elif e.total_steps:
            done, planned = e.step, e.total_steps
        else:
            done = planned = 0
        return NodeProgress(e.name, e.host, e.steps, e.examples, steps_rate, examples_rate,
                            sorted(timed)[len(timed) // 2] if timed else 0.0,
                            None if wait_share is None else min(1.0, wait_share), done, planned,
                            e.epoch, e.epochs, e.epoch_step, e.epoch_steps)

    def findings(self) -> list[Finding]:
        windows = self.windows()
        return straggler_findings(windows) + input_bound_findings(windows)


class Insight:
    """The run's consumer of its own ``Pace`` and ``NodeMemory`` events: ``progress()`` on
    demand, and each straggler, input-bound or growing-memory finding published once per node and
    kind through ``publish``."""

    def __init__(self, events: EventStream, publish: Callable[[list[Finding]], None]) -> None:
        self.board = PaceBoard()
        self.memory = MemoryBoard()
        self._publish = publish
        self._lock = threading.Lock()
        self._raised: set[tuple[str, str]] = set()  # (code, node): the numbers in a finding move, the news does not
        self._unsubscribe = events.subscribe(self._on_event, replay=False)

    def progress(self, ended: bool = False) -> Progress:
        with self._lock:
            return self.board.progress(ended)

    def _on_event(self, e: Event) -> None:
        if isinstance(e, LaunchSubmitted) and e.attempt:
            with self._lock:
                self.board.reset()
                self.memory.reset()
        elif isinstance(e, (Pace, NodeMemory)):
            with self._lock:
                if isinstance(e, Pace):
                    self.board.add(e)
                    found = self.board.findings()
                else:
                    found = [f] if (f := self.memory.add(e, time.monotonic())) is not None else []
                new = [f for f in found if (f.code, f.subject) not in self._raised]
                self._raised.update((f.code, f.subject) for f in new)
            if new:
                self._publish(new)

    def close(self) -> None:
        self._unsubscribe()
