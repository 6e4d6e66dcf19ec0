"""``tfos_notebook.Run`` is the runtime's run with MLflow logging attached from above: the same
options and the ``mlflow`` one, while the runtime's own run knows no ``mlflow`` option."""

from __future__ import annotations

import inspect

import tfos_notebook
from tfos_notebook.runtime.driver.run.launch import Run
from tfos_notebook.tracking.run import TrackedRun


def test_the_public_run_is_the_tracked_run():
    assert tfos_notebook.Run is TrackedRun and issubclass(TrackedRun, Run)


def test_the_tracked_run_takes_the_runtimes_options_and_mlflow():
    ours = inspect.signature(TrackedRun.__init__).parameters
    theirs = inspect.signature(Run.__init__).parameters
    assert "mlflow" not in theirs and ours["mlflow"].default is None
    assert [(p.name, p.kind, p.default) for p in ours.values() if p.name != "mlflow"] == \
        [(p.name, p.kind, p.default) for p in theirs.values()]
