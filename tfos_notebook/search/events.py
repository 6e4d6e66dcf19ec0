"""The events of a sweep, on its own stream (``Sweep.events``), for its monitor, its runs-registry
record and its MLflow parent run; each trial's own run keeps its own stream. ``run_id`` is the
sweep's id."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..runtime.driver.events import Event, RunFinished


@dataclass(frozen=True)
class SweepStarted(Event):
    """The sweep began (or resumed): its plan. ``done`` trials counted already (a resume),
    ``requeued``: interrupted trials asked again."""

    name: str
    trials: int
    parallel: int
    workers: int
    metric: str
    direction: str
    sampler: str
    pruner: str
    space: dict[str, str]
    done: int = 0
    requeued: tuple[int, ...] = ()


@dataclass(frozen=True)
class TrialStarted(Event):
    """Trial ``number`` was launched as the run ``trial_run_id`` (named ``trial_name``) with ``params``."""

    number: int
    params: dict[str, Any]
    trial_run_id: str
    trial_name: str
    resumes: int | None = None


@dataclass(frozen=True)
class TrialReported(Event):
    """The chief of trial ``number`` reported the sweep's metric: ``value`` at ``step``."""

    number: int
    step: int
    value: float


@dataclass(frozen=True)
class TrialPruned(Event):
    """The pruner stopped trial ``number`` at ``step`` (its run is being stopped)."""

    number: int
    step: int
    value: float


@dataclass(frozen=True)
class TrialEnded(Event):
    """Trial ``number`` ended: ``state`` is ``complete``, ``pruned``, ``failed`` or ``stopped`` (the
    sweep was stopped; it runs again on resume). ``value``: its metric (the last reported one, or
    what the chief returned); ``stop_secs``: a pruned trial's seconds from the decision to its
    run's end, its slots free again. ``earlier``: a trial a resumed sweep found ended in its study
    (published once, right after ``SweepStarted``, in the study's order)."""

    number: int
    state: str
    value: float | None = None
    step: int = 0
    error: str = ""
    stop_secs: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)
    earlier: bool = False


@dataclass(frozen=True)
class SweepFinished(RunFinished):
    """The sweep ended (``finished``, ``failed`` or ``stopped``); the views' last event, as a run's
    end is theirs. ``best``: the best trial's number, or -1."""

    best: int = -1
    best_value: float | None = None


COUNTED = ("complete", "pruned", "failed")  # the ends that count against a sweep's trials


def tally(ended: Iterable[TrialEnded], direction: str) -> tuple[dict[str, int], TrialEnded | None]:
    """How many of ``ended`` finished, were pruned and failed, and the best finished one (by
    ``direction``, ``minimize`` or ``maximize``; None before one finished)."""
    ended = list(ended)
    counts = {state: sum(1 for e in ended if e.state == state) for state in COUNTED}
    complete = [e for e in ended if e.state == "complete" and e.value is not None]
    if not complete:
        return counts, None
    return counts, (min if direction == "minimize" else max)(complete, key=lambda e: e.value)
