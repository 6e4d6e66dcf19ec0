"""A sweep's search space and options are checked before anything starts: each problem names the
entry and the fix. No Spark: every refusal comes before the sweep touches the session."""

from __future__ import annotations

import importlib.util

import pytest

from tfos_notebook.errors import ConfigError
from tfos_notebook.examples.sweep_trial import SPACE, trial
from tfos_notebook.search.runner import Sweep
from tfos_notebook.search.space import parse_space

pytestmark = pytest.mark.skipif(importlib.util.find_spec("optuna") is None,
                                reason="sweeps need Optuna (the sweep extra; Databricks ML runtimes before 16.4 ship none)")


def test_each_form_becomes_its_distribution_and_plain_values_stay_fixed():
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    space = parse_space({"lr": (1e-4, 1e-1, "log"), "units": (16, 128, 16), "layers": (1, 4), "drop": (0.0, 0.5),
                         "opt": ["adam", "sgd"], "beta": FloatDistribution(0.8, 0.99), "epochs": 3, "tag": "x"})
    d = space.distributions
    assert d["lr"] == FloatDistribution(1e-4, 1e-1, log=True)
    assert d["units"] == IntDistribution(16, 128, step=16)
    assert d["layers"] == IntDistribution(1, 4) and d["drop"] == FloatDistribution(0.0, 0.5)
    assert d["opt"] == CategoricalDistribution(("adam", "sgd")) and d["beta"] == FloatDistribution(0.8, 0.99)
    assert space.fixed == {"epochs": 3, "tag": "x"}
    assert space.describe()["lr"] == "0.0001..0.1 log" and space.describe()["opt"] == "choice of 'adam', 'sgd'"


@pytest.mark.parametrize(("space", "says"), [
    ([("lr", 1)], "must be a dict"),
    ({"lr": (0.1, 0.001)}, "space['lr']: the range's low (0.1) must be below its high (0.001); write (0.001, 0.1)"),
    ({"lr": (0.0, 0.1, "log")}, "space['lr']: a log range must stay above 0"),
    ({"opt": []}, "space['opt']: an empty list has nothing to choose from"),
    ({"layer": [object()]}, "space['layer']: choices must be numbers, strings, bools or None"),
    ({"lr": {0.1, 0.2}}, "space['lr']: set {"),
    ({"lr": (0.1, 1.0, "linear")}, "space['lr']: a range's third item is 'log' or a step above 0"),
    ({"lr": ("a", "b")}, "space['lr']: a range's low and high must be numbers"),
    ({"2lr": [1, 2]}, "space entry '2lr': names become args.<name>"),
    ({"trial": [1, 2]}, "space['trial']: args.trial is the sweep's own"),
    ({"epochs": 3}, "the search space searches nothing"),
])
def test_a_malformed_space_is_refused_naming_the_entry_and_the_fix(space, says):
    with pytest.raises(ConfigError) as e:
        parse_space(space)
    assert says in str(e.value)


def test_the_grid_walks_every_value_and_refuses_a_continuous_range():
    assert parse_space({"units": (16, 64, 16), "opt": ["a", "b"]}).grid_size() == 8
    with pytest.raises(ConfigError, match=r"space\['lr'\]: sampler 'grid' needs a finite set of values"):
        parse_space({"lr": (1e-4, 1e-1, "log")}).grid()


@pytest.mark.parametrize(("options", "says"), [
    ({"trials": 0}, "trials must be a whole number of at least 1, got 0"),
    ({"workers": 0}, "workers must be a whole number of at least 1"),
    ({"parallel": 0}, "parallel must be a whole number of at least 1"),
    ({"metric": "val loss"}, "metric must be the name the chief reports"),
    ({"direction": "down"}, "direction must be 'minimize' or 'maximize'"),
    ({"sampler": "bayes"}, "sampler must be one of tpe, random, grid"),
    ({"pruner": "hyperband!"}, "pruner must be one of median, asha, none"),
    ({"gpus": 1}, "unknown option 'gpus' for the trials' runs; known:"),
    ({"sampler": "grid", "trials": 9, "space": {"opt": ["a", "b"]}}, "trials=9 but the grid has 2 points"),
    ({"name": "my sweep"}, "name 'my sweep': a sweep's name names its study and folders"),
])
def test_bad_sweep_options_are_refused_before_the_session_is_touched(options, says):
    space = options.pop("space", SPACE)
    kwargs = {"trials": 4, **options}
    with pytest.raises(ConfigError) as e:
        Sweep(None, trial, space, **kwargs)  # no session: the refusal comes first
    assert says in str(e.value)
