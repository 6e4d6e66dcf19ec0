"""Findings about how the nodes train, from their step timing: a straggler (one node's steps take
well longer than the others') and an input-bound node (it spends much of its time waiting for the
next batch of fed data). Pure functions of the nodes' recent ``Pace`` reports, like ``diagnose``.

What can be told, and what cannot: step times come from the nodes' own clocks (Keras's batches
with ``ctx.callbacks()``, or the steps between two ``ctx.report`` calls). Under a synchronous
strategy (MultiWorkerMirroredStrategy) every step ends with an all-reduce, so the other nodes wait
for a slow one inside their own step and all show the same step time: no node stands out, and the
Profile tab's per-node traces show who waits. The wait for data is measured only where this
project feeds the data (InputMode.SPARK: ``ctx.dataset``, ``DataFeed.next_batch``); a node that
reads its own data (InputMode.TENSORFLOW) waits inside ``tf.data``, which only the profiler's
input-pipeline analysis sees.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..events.finding import WARNING, Finding

WINDOW_REPORTS = 10  # the reports (about one a second) a finding looks at
MIN_REPORTS = 5  # reports a node needs in that window before it is judged
STRAGGLER_RATIO = 1.5  # a node whose mean step time is this many times the median of the others'
INPUT_BOUND_SHARE = 0.5  # a node that waits for fed data this share of its time or more


@dataclass(frozen=True)
class NodeWindow:
    """A node (``role:index`` on ``host``) and its recent ``Pace`` reports, oldest first."""

    name: str
    host: str
    reports: tuple[Any, ...]  # events.Pace


def _ms(secs: float) -> str:
    return f"{secs * 1000:.0f} ms" if secs < 10 else f"{secs:.1f} s"


def _timed(w: NodeWindow) -> tuple[int, float] | None:
    """The steps and seconds of the node's recent reports (None with fewer than ``MIN_REPORTS``
    reports that counted steps): their ratio is its mean step time. Not a median of the reports'
    own step times: an epoch's end (a checkpoint, the events written) makes one report's steps
    slow, and under a synchronous strategy it lands in one node's report and in the next one of
    another's, so their medians differ by chance (1.7x seen on an even 2-node run) while their
    sums agree."""
    if sum(p.window_steps > 0 for p in w.reports) < MIN_REPORTS:
        return None
    return sum(p.window_steps for p in w.reports), sum(p.secs for p in w.reports)


def straggler_findings(windows: Sequence[NodeWindow]) -> list[Finding]:
    """A warning per node whose mean step time over its recent reports is at least
    ``STRAGGLER_RATIO`` times the median of the other nodes' (at least two nodes timed)."""
    timed = {w.name: t for w in windows if (t := _timed(w)) is not None}
    means = {name: secs / steps for name, (steps, secs) in timed.items()}
    if len(means) < 2:
        return []
    findings = []
    for w in windows:
        mine = means.get(w.name)
        others = [m for name, m in means.items() if name != w.name]
        if mine is None or not others:
            continue
        typical = statistics.median(others)
        if typical > 0 and mine >= STRAGGLER_RATIO * typical:
            findings.append(Finding(
                code="straggler",
                cause=f"{w.name} on {w.host} is a straggler: its steps take {_ms(mine)}, {mine / typical:.1f}x the "
                      f"other nodes' {_ms(typical)}",
                evidence=tuple(f"{x.name} on {x.host}: {_ms(means[x.name])} a step, {timed[x.name][0]} steps in "
                          f"{timed[x.name][1]:.1f} s over its last {len(x.reports)} reports"
                          for x in windows if x.name in means),
                remedy=f"see what else runs on {w.host} (another job or run, a slower or busier CPU or GPU) and "
                       f"whether {w.name} gets more data than the others; its trace shows where the time goes: "
                       f"%tfos_profile RUN --nodes {w.name}",
                severity=WARNING, subject=w.name))
    return findings


def input_bound_findings(windows: Sequence[NodeWindow]) -> list[Finding]:
    """A warning per fed node that waited for its data ``INPUT_BOUND_SHARE`` of its recent time or more."""
    findings = []
    for w in windows:
        fed = [p for p in w.reports if p.input_measured]
        if len(fed) < MIN_REPORTS:
            continue
        secs, wait = sum(p.secs for p in fed), sum(p.wait_secs for p in fed)
        share = min(1.0, wait / secs) if secs else 0.0
        if share < INPUT_BOUND_SHARE:
            continue
        steps = sum(p.window_steps for p in fed)
        findings.append(Finding(
            code="input_bound",
            cause=f"{w.name} on {w.host} is input-bound: it spends {share:.0%} of its time waiting for the next "
                  "batch from Spark",
            evidence=(f"{w.name}: waited {wait:.1f} s of the last {secs:.1f} s for fed data, "
                      f"{steps / secs:.1f} steps/s",),
            remedy="feed it faster: cache or persist the DataFrame (df.cache(), then an action such as df.count()) "
                   "when an expensive transformation (a Python UDF, a join, a file scan) computes it again on every "
                   "epoch; give it more partitions (df.repartition(n)) so that more Spark tasks compute it; let the "
                   "node prefetch more batches (ctx.dataset(..., prefetch=8)); or take bigger batches",
            severity=WARNING, subject=w.name))
    return findings
