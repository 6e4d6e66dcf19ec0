"""Evaluate a run's checkpoints as they appear, from any kernel or script on the driver.

``evaluate_run("digits", fn)`` finds the run in the runs registry, and on a background thread
waits for each new checkpoint in the run's model directory, calls ``fn(checkpoint)`` (a
:class:`~.checkpoints.Checkpoint`: ``path``, ``step``, ``restore(model)``), and writes the
metrics it returns as TensorBoard scalars at the checkpoint's step into ``<mirror>/eval``: the
run's own TensorBoard shows them as the run ``eval`` beside the nodes' training curves. It stops
once the run has ended and its last checkpoint is evaluated.

Evaluation never touches the training: it only reads files the nodes have finished writing (see
:mod:`.checkpoints`), on the driver, from a thread whose CPU priority is lowered.

    from tfos_notebook.notebook.evaluate import evaluate_run

    def accuracy(checkpoint):
        model = checkpoint.restore(build_model())
        loss, acc = model.evaluate(x_test, y_test, verbose=0)
        return {"loss": loss, "accuracy": acc}

    ev = evaluate_run("digits", accuracy, every=10)
    ev.wait()          # [(1, {"loss": ..., "accuracy": ...}), (2, {...}), ...]

No IPython import here: ``%%tfos_evaluate`` (magics.py) is a thin parser over :func:`evaluate_run`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError
from ..runtime.host.versions import tf_keras_installed
from ..state import registry
from ..tensorboard.mirror import UnsafePathError, check_relpath
from .checkpoints import Checkpoint
from .evaluation import Evaluation, EvaluationError, EvaluationFailure, check_shared
from .frontend import OutputTarget

__all__ = ["Evaluation", "EvaluationError", "EvaluationFailure", "evaluate_run"]


def evaluate_run(run: Any, fn: Callable[[Checkpoint], Mapping[str, Any]], *, every: float = 10.0,
                 name: str = "eval", settle: float = 2.0, max_failures: int = 3, latest_only: bool = False,
                 say: Callable[[str], None] = print, target: OutputTarget | None = None) -> Evaluation:
    """Evaluate the checkpoints of ``run`` as they appear, on a background thread; returns at once.

    Args:
        run: the run's name or run id in the runs registry (any kernel's run on this driver), or a
            run handle (``TrainRun``, ``Run``).
        fn: called with each new :class:`~.checkpoints.Checkpoint` (``path``, ``step``,
            ``restore(model)``), oldest first; returns a dict of scalar metrics (numbers, numpy or
            TensorFlow scalars), written as TensorBoard scalars at the checkpoint's step.
        every: seconds between looks at the model directory while the run goes on.
        name: the TensorBoard run the curves appear as (a directory under the run's mirror).
        settle: seconds a checkpoint file must be left unchanged before it is read, when no
            TensorFlow ``checkpoint`` state file vouches for it.
        max_failures: failures of ``fn`` in a row after which the evaluation stops.
        latest_only: while the run goes on, evaluate only the newest new checkpoint of each look
            (for an evaluation slower than training); the default evaluates every checkpoint.
        say: where the lines for the user go (one per evaluated checkpoint).
        target: the notebook cell those lines follow (see ``frontend.OutputTarget``).

    Raises:
        ConfigError: no such run in the registry (the message lists the known ones), a run
            without a model directory, or a ``name`` that is not a plain directory name.
        FuseError: the run's model directory needs a Databricks mount (``/Volumes``, ``/dbfs``)
            this driver lacks.
    """
    which = run if isinstance(run, str) else getattr(run, "run_id", None)
    if not which:
        raise ConfigError(f"run must be a run's name or run id, or a run handle; got {type(run).__name__}")
    if every <= 0 or settle < 0 or max_failures < 1:
        raise ConfigError("every must be more than 0, settle 0 or more, max_failures at least 1")
    try:
        check_relpath(name)
    except UnsafePathError:
        raise ConfigError(f"name {name!r} must be a plain directory name such as 'eval'") from None
    if "/" in name:
        raise ConfigError(f"name {name!r} must be a plain directory name such as 'eval', without '/'")
    record = registry.get_run(which)
    _same_keras_as_the_nodes()
    if not record.model_dir:
        raise ConfigError(f"run {record.name} has no model directory, so there are no checkpoints to evaluate: "
                          "launch it with --model-dir DIR (model_dir=...) and save checkpoints there, e.g. "
                          "with callbacks=ctx.callbacks()")
    check_shared(record)
    return Evaluation(record, fn, every=every, name=name, settle=settle, max_failures=max_failures,
                      latest_only=latest_only, say=say, target=target).start()


def _same_keras_as_the_nodes() -> None:
    """Read checkpoints with the Keras the nodes wrote them with: the nodes use tf-keras when it is
    installed (``TF_USE_LEGACY_KERAS=1``), so this process does too, unless TensorFlow is already
    imported or the variable is set."""
    if "tensorflow" not in sys.modules and tf_keras_installed():
        os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
