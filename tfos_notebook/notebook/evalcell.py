"""A ``%%tfos_evaluate`` cell as an evaluation function (see :func:`.evaluate.evaluate_run`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .capture import local_cell_function
from .checkpoints import Checkpoint


@dataclass(frozen=True)
class EvaluationCell:
    """A ``%%tfos_evaluate`` cell as an evaluation function: the cell body runs in the kernel with
    ``checkpoint`` and ``step`` in scope and the notebook's names visible; it returns the metrics."""

    function: Callable[[Checkpoint, int], Any]
    filename: str

    def __call__(self, checkpoint: Checkpoint) -> Any:
        return self.function(checkpoint, checkpoint.step)


def evaluation_cell(body: str, user_ns: dict[str, Any], execution_count: int | None = None) -> EvaluationCell:
    """Compile a ``%%tfos_evaluate`` cell body (see :class:`EvaluationCell`).

    Raises:
        CellError: a syntax error, reported at the cell's line.
    """
    function = local_cell_function(body, user_ns, "tfos_evaluate_cell", ("checkpoint", "step"), execution_count,
                                   magic="tfos_evaluate")
    return EvaluationCell(function, function.__code__.co_filename)
