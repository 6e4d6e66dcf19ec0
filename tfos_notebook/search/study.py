"""The Optuna side of a sweep: its study, kept on the driver so that a stopped sweep resumes.

Optuna decides what to try (its samplers) and what to stop early (its pruners); the sweep only
asks it for trials and tells it how each ended, from one thread (``runner.Sweep``'s). The study
lives in ``storage``: by default an SQLite file under the state directory
(``<state dir>/sweeps/<name>/study.db``), so a sweep started again under the same name carries on
where it stopped; any Optuna storage URL (``postgresql://...``) or storage object works too.

Trials that a stop interrupted are marked failed with the user attribute ``tfos_stopped`` (those
of a driver that died are still marked running) and asked again, with the same parameters, when
the sweep resumes (``tfos_resumes`` names the trial a new one stands in for); they do not count
against the sweep's ``trials``.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
from ..state.files import state_dir
from .events import TrialEnded
from .space import Space

SAMPLERS = ("tpe", "random", "grid")
PRUNERS = ("median", "asha", "none")
STOPPED, RESUMES = "tfos_stopped", "tfos_resumes"
STATES = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed"}  # Optuna's, as the sweep's events name them


def require_optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise ConfigError("sweeps need Optuna on the driver: pip install 'tfos_notebook[sweep]' "
                          "(or pip install optuna)") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # a line per trial would fill the cell
    return optuna


def make_sampler(sampler: Any, space: Space, seed: int | None) -> Any:
    """The Optuna sampler for ``sampler``: ``tpe`` (Optuna's default), ``random``, ``grid`` (every
    combination of the space's values, queued in the study by :func:`enqueue_grid`: Optuna's
    ``GridSampler`` stops the study once the grid is walked, which only ``study.optimize`` allows,
    not the ask-and-tell a sweep uses), or a sampler object."""
    optuna = require_optuna()
    if isinstance(sampler, optuna.samplers.BaseSampler):
        return sampler
    if sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if sampler == "grid":  # the grid's points are queued by enqueue_grid; nothing is left to sample
        space.grid()  # refuses a space without a finite grid
        return optuna.samplers.RandomSampler(seed=seed)
    raise ConfigError(f"sampler must be one of {', '.join(SAMPLERS)} or an optuna sampler, got {sampler!r}")


def make_pruner(pruner: Any) -> Any:
    """The Optuna pruner for ``pruner``: ``median`` (a trial below the median of the finished ones
    at the same step, once two finished), ``asha`` (asynchronous successive halving: rungs at the
    reported steps 1, 4, 16..., the best quarter of the trials that reached a rung going on),
    ``none``, or a pruner object."""
    optuna = require_optuna()
    if isinstance(pruner, optuna.pruners.BasePruner):
        return pruner
    if pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0)
    if pruner == "asha":  # rungs from the first report on (Optuna's "auto" waits for a finished trial)
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1)
    if pruner in ("none", None):
        return optuna.pruners.NopPruner()
    raise ConfigError(f"pruner must be one of {', '.join(PRUNERS)} or an optuna pruner, got {pruner!r}")


def default_storage(name: str) -> str:
    return "sqlite:///" + os.path.join(state_dir("sweeps", name), "study.db")


def open_study(name: str, storage: Any, direction: str, sampler: Any, pruner: Any) -> Any:
    """The sweep's study: created, or loaded when ``name`` exists in ``storage`` (a resume).

    Raises:
        ConfigError: the stored study optimizes the other direction.
    """
    optuna = require_optuna()
    study = optuna.create_study(study_name=name, storage=storage or default_storage(name), direction=direction,
                                sampler=sampler, pruner=pruner, load_if_exists=True)
    if study.direction.name.lower() != direction:
        raise ConfigError(f"sweep {name!r} was started to {study.direction.name.lower()} its metric; resume it with "
                          f"direction={study.direction.name.lower()!r}, or give the new sweep another name")
    return study


def ended_trials(study: Any) -> list[Any]:
    """The study's trials that count against the sweep's ``trials``: finished, pruned, or failed on
    their own (not stopped, and no later trial standing in for them), oldest first."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    standing_in = {t.user_attrs.get(RESUMES) for t in trials}
    return [t for t in trials if t.number not in standing_in and (
        t.state in (TrialState.COMPLETE, TrialState.PRUNED)
        or (t.state is TrialState.FAIL and not t.user_attrs.get(STOPPED)))]


def earlier_ends(study: Any, sweep_id: str) -> list[TrialEnded]:
    """How each trial of :func:`ended_trials` ended, as the sweep's events say it (``earlier``)."""
    out = []
    for t in ended_trials(study):
        steps = t.intermediate_values
        last = max(steps) if steps else 0
        value = t.value if t.value is not None else steps.get(last)
        out.append(TrialEnded(sweep_id, number=t.number, state=STATES[t.state.name], value=value, step=last,
                              error=t.user_attrs.get("error", ""), params=dict(t.params), earlier=True))
    return out


def requeue_interrupted(study: Any) -> list[int]:
    """Ask again, with the same parameters, every trial a stop (or the driver's end) interrupted;
    returns their numbers. A trial still marked running belongs to a sweep whose driver is gone: it
    is marked failed, and asked again likewise."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    standing_in = {t.user_attrs.get(RESUMES) for t in trials}
    again = [t for t in trials if t.number not in standing_in and (
        t.state is TrialState.RUNNING or (t.state is TrialState.FAIL and t.user_attrs.get(STOPPED)))]
    for t in again:
        if t.state is TrialState.RUNNING:
            study.tell(t.number, state=TrialState.FAIL)
        study.enqueue_trial(t.params, user_attrs={RESUMES: t.number})
    return [t.number for t in again]


def enqueue_grid(study: Any, space: Space, seed: int | None) -> None:
    """Queue every point of ``space``'s grid the study has not queued or tried yet, in an order
    shuffled by ``seed``."""
    import itertools
    import random

    grid = space.grid()
    names = list(grid)
    points = [dict(zip(names, values, strict=True)) for values in itertools.product(*grid.values())]
    random.Random(seed).shuffle(points)
    seen = [t.params for t in study.get_trials(deepcopy=False)]
    for point in points:
        if point not in seen:
            study.enqueue_trial(point)
