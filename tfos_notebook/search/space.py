"""A sweep's search space, checked once before any trial starts, as Optuna distributions.

A space is a dict from a name (it becomes ``args.<name>`` in every trial) to one of:

- a list of choices: ``[32, 64, 128]``, ``["adam", "sgd"]``;
- a range ``(low, high)``: integers when both are ``int``, else floats; ``(low, high, "log")``
  samples on a log scale, ``(low, high, step)`` on a grid of ``step``;
- an Optuna distribution (``optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True)``...);
- a plain value (a number, a string, a bool, None): the same in every trial, not searched.

Every problem is a ``ConfigError`` naming the entry and how to write it.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

#: Names every trial's ``args`` has already: a space entry may not take them.
RESERVED = frozenset({"trial", "sweep"})

FORMS = ("a list of choices [a, b, ...], a range (low, high), (low, high, 'log') or (low, high, step), "
         "an optuna distribution, or a plain value kept fixed")


@dataclass(frozen=True)
class Space:
    """A checked search space: ``distributions`` (name to Optuna distribution) are searched,
    ``fixed`` values are handed to every trial as they are."""

    distributions: dict[str, Any]
    fixed: dict[str, Any]

    def grid(self) -> dict[str, list]:
        """The grid ``GridSampler`` walks: every value of each searched entry.

        Raises:
            ConfigError: an entry has no finite list of values (a float range without a step).
        """
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        grid: dict[str, list] = {}
        for name, d in self.distributions.items():
            if isinstance(d, CategoricalDistribution):
                grid[name] = list(d.choices)
            elif isinstance(d, IntDistribution) and not d.log:
                grid[name] = list(range(d.low, d.high + 1, d.step))
            elif isinstance(d, FloatDistribution) and d.step is not None and not d.log:
                count = int(round((d.high - d.low) / d.step)) + 1
                grid[name] = [d.low + i * d.step for i in range(count)]
            else:
                raise ConfigError(f"space[{name!r}]: sampler 'grid' needs a finite set of values; write a list "
                                  f"of the values to try, or a range with a step (low, high, step)")
        return grid

    def grid_size(self) -> int:
        return math.prod(len(values) for values in self.grid().values())

    def describe(self) -> dict[str, str]:
        """Each entry as a short text (for MLflow's parameters and the monitor)."""
        out = {name: _describe(d) for name, d in self.distributions.items()}
        out.update({name: repr(v) for name, v in self.fixed.items()})
        return out


def parse_space(space: Any) -> Space:
    """Check ``space`` (see the module's docstring) and return it as a :class:`Space`.

    Raises:
        ConfigError: not a dict, an entry's name is not an identifier or is reserved, an entry of
            no known form, a range whose low is not below its high, a log range that reaches 0,
            an empty list of choices, or nothing to search.
    """
    if not isinstance(space, Mapping):
        raise ConfigError(f"the search space must be a dict of name: entry, got {type(space).__name__}; "
                          f"each entry is {FORMS}")
    distributions: dict[str, Any] = {}
    fixed: dict[str, Any] = {}
    for name, entry in space.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise ConfigError(f"space entry {name!r}: names become args.<name> in the trial, so each must be a "
                              "Python identifier")
        if name in RESERVED:
            raise ConfigError(f"space[{name!r}]: args.{name} is the sweep's own; rename the entry")
        d = _distribution(name, entry)
        if d is None:
            fixed[name] = entry
        else:
            distributions[name] = d
    if not distributions:
        raise ConfigError("the search space searches nothing: give at least one entry as " + FORMS.split(", a plain")[0])
    return Space(distributions, fixed)


def _distribution(name: str, entry: Any) -> Any:
    from optuna.distributions import (
        BaseDistribution,
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    where = f"space[{name!r}]"
    if isinstance(entry, BaseDistribution):
        return entry
    if entry is None or isinstance(entry, (bool, int, float, str)):
        return None
    if isinstance(entry, list):
        if not entry:
            raise ConfigError(f"{where}: an empty list has nothing to choose from; list the values to try")
        bad = [v for v in entry if not (v is None or isinstance(v, (bool, int, float, str)))]
        if bad:
            raise ConfigError(f"{where}: choices must be numbers, strings, bools or None (Optuna stores them), "
                              f"got {type(bad[0]).__name__}; choose an index or a name and build the object in "
                              "the trial")
        return CategoricalDistribution(tuple(entry))
    if isinstance(entry, tuple) and len(entry) in (2, 3):
        low, high = entry[0], entry[1]
        third = entry[2] if len(entry) == 3 else None
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
            raise ConfigError(f"{where}: a range's low and high must be numbers, got {entry!r}; for choices write "
                              "a list")
        if not low < high:
            raise ConfigError(f"{where}: the range's low ({low}) must be below its high ({high}); write "
                              f"({min(low, high)}, {max(low, high)})")
        log = third == "log"
        if third is not None and not log and not (isinstance(third, (int, float)) and not isinstance(third, bool)
                                                     and third > 0):
            raise ConfigError(f"{where}: a range's third item is 'log' or a step above 0, got {third!r}")
        if log and low <= 0:
            raise ConfigError(f"{where}: a log range must stay above 0, got low {low}; start it at a small "
                              "positive value")
        step = None if log or third is None else third
        if isinstance(low, int) and isinstance(high, int) and (step is None or isinstance(step, int)):
            return IntDistribution(low, high, log=log, step=step or 1)
        return FloatDistribution(float(low), float(high), log=log, step=None if step is None else float(step))
    raise ConfigError(f"{where}: {type(entry).__name__} {entry!r} is not a search space entry; write {FORMS}")


def _describe(d: Any) -> str:
    from optuna.distributions import CategoricalDistribution

    if isinstance(d, CategoricalDistribution):
        return "choice of " + ", ".join(map(repr, d.choices))
    scale = " log" if getattr(d, "log", False) else ""
    step = getattr(d, "step", None)
    by = f" step {step}" if step not in (None, 1) else ""
    return f"{d.low}..{d.high}{scale}{by}"
