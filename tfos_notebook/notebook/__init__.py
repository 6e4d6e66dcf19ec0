"""The notebook layer: ``%%tfos_train`` and friends, the live monitor (widget or text), and the
plain functions behind them.

Importing this package loads neither IPython nor ipywidgets (``capture`` also runs on the nodes);
``%load_ext tfos_notebook`` imports :mod:`.magics`, which needs IPython.
"""

from .api import KernelRuns, TrainOptions, run_local, show_tensorboard, status_text, stop_run, train
from .capture import CellError, CellFunction, capture_cell
from .handle import TrainRun
from .monitor import Monitor
from .panel import TensorBoardPanel
from .text import TextMonitor

__all__ = ["CellError", "CellFunction", "KernelRuns", "Monitor", "TensorBoardPanel", "TextMonitor", "TrainOptions",
           "TrainRun", "capture_cell", "run_local", "show_tensorboard", "status_text", "stop_run", "train"]
