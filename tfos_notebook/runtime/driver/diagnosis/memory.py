"""Findings about nodes' memory, from their memory guards' reports (``NodeMemory`` events): a node
whose process keeps growing is named, with its rate and when it will reach its cap or run its
host out of memory, while there is still time to act. Pure Python, no Spark; ``insight.Insight``
feeds it and publishes what it finds, once per node.
"""

from __future__ import annotations

import itertools
from collections import deque

from ...wire.reports import host_floor_mib
from ..events.finding import Finding
from ..events.types import NodeMemory

TREND_SECS = 10.0  # the growth is judged over this much of the latest reports, at least
GROWING_MIB_PER_SEC = 16.0  # slower than this is not news
STEADY = 0.75  # the latest growth keeps this share of the pace before it, at least
WARN_WITHIN_SECS = 300.0  # named when the cap or the host's floor is this close at the current rate

MEMORY_REMEDY = ("find what the function keeps: a dataset cached in memory (.cache() with no file) or "
                 "materialised whole, a list of batches or results that grows each step, MLflow autologging "
                 "a repeated dataset on every epoch (mlflow/mlflow#9600: mlflow.autolog(log_datasets=False)); "
                 "or give the node more room (memory_limit_mb / --memory-limit, the executors' memory)")


class MemoryBoard:
    """The ``NodeMemory`` reports of one attempt, per node, over the last ``TREND_SECS`` and more."""

    def __init__(self) -> None:
        self._nodes: dict[int, deque[tuple[float, NodeMemory]]] = {}

    def add(self, e: NodeMemory, now: float) -> Finding | None:
        """Keep ``e``, read at ``now``; returns the finding about its node, if it grows so (only
        the node that reported is judged again: the others' readings have not changed)."""
        window = self._nodes.setdefault(e.task, deque())
        window.append((now, e))
        while len(window) > 2 and now - window[1][0] >= 3 * TREND_SECS:
            window.popleft()
        return growing(window)

    def reset(self) -> None:
        self._nodes.clear()


def growing(window: deque[tuple[float, NodeMemory]]) -> Finding | None:
    """The finding for a node whose reports in ``window`` ((time, report), oldest first) grow
    steadily and fast enough to reach its cap, or its host's floor, within ``WARN_WITHIN_SECS``;
    None otherwise.

    Steadily: the window (``TREND_SECS`` at least) is cut in thirds by time, and the last third
    grows at ``GROWING_MIB_PER_SEC`` or more, the middle one at half that at least, and the last
    no slower than ``STEADY`` of the faster before it. A node's start-up (TensorFlow's import,
    the model, the first trace) grows fast and then slower, and is not named; a leak keeps its
    pace, or speeds up, and is. The time left is reckoned at the last third's rate.
    """
    (t0, first), (t1, last) = window[0], window[-1]
    secs = t1 - t0
    if secs < TREND_SECS or len(window) < 4:
        return None
    marks = [window[0], *(next(p for p in window if p[0] >= t0 + secs * k / 3) for k in (1, 2)), window[-1]]
    rates = [(rb.rss_mib - ra.rss_mib) / (tb - ta) if tb > ta else 0.0
             for (ta, ra), (tb, rb) in itertools.pairwise(marks)]
    rate = rates[2]
    if rate < GROWING_MIB_PER_SEC or rates[1] < GROWING_MIB_PER_SEC / 2 or rate < STEADY * max(rates[:2]):
        return None
    floor = host_floor_mib(last.host_total_mib)
    host_room = last.host_available_mib - floor
    limits = [(host_room / rate, f"its host's available memory ({last.host_available_mib:,.0f} MiB of "
                                 f"{last.host_total_mib:,.0f} MiB) falls to the {floor:,.0f} MiB kept free")]
    if last.cap_mib:
        limits.append(((last.cap_mib - last.rss_mib) / rate, f"it reaches its cap of {last.cap_mib:,.0f} MiB"))
    eta, what = min(limits)
    if eta > WARN_WITHIN_SECS:
        return None
    name = last.name
    return Finding(
        code="memory_growing",
        cause=f"{name}'s memory grows by {rate:,.0f} MiB/s: {what} in about {max(eta, 0):,.0f} s, and then "
              "its process is stopped",
        evidence=(f"{name} on {last.host}: {first.rss_mib:,.0f} MiB -> {last.rss_mib:,.0f} MiB resident "
                  f"in {secs:,.0f} s",),
        remedy=MEMORY_REMEDY, severity="warning", subject=name)
