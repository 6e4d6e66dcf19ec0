"""The notebook layer: ``%%tfos_train`` and friends, the live monitor (widget or text), and the
plain functions behind them.

The names below are imported on first use (see ``lazy.py``), so importing this package (or one of
its modules) costs nothing more; none of them loads IPython, which only ``%load_ext tfos_notebook``
imports (with :mod:`.magics`).
"""

from __future__ import annotations

from ..lazy import lazy_exports

_EXPORTS = {
    **{name: (".api", name) for name in (
        "TrainOptions", "run_local", "status_text", "stop_run", "train")},
    "show_tensorboard": (".boards", "show_tensorboard"),
    **{name: (".capture", name) for name in ("CellError", "capture_cell")},
    "CellFunction": ("..cellfn", "CellFunction"),
    "KernelRuns": (".runs", "KernelRuns"),
    "TrainRun": (".handle", "TrainRun"),
    "Monitor": (".monitor", "Monitor"),
    "TensorBoardPanel": (".panel", "TensorBoardPanel"),
    "TextMonitor": (".text", "TextMonitor"),
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
