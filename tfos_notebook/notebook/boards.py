"""``%tfos_tensorboard``: a live TensorBoard for a run of this kernel or any log directory, shown
as a panel or a URL (see :func:`show_tensorboard`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..runtime.driver.spark import active_backend
from .frontend import choose_monitor
from .handle import TrainRun
from .runs import KernelRuns

if TYPE_CHECKING:
    from ..tensorboard import TensorBoardHandle
    from .panel import TensorBoardPanel


def show_tensorboard(runs: KernelRuns, which: str | None = None, *, stop: bool = False, display: str = "auto",
                     shell: Any = None, say: Callable[[str], None] = print) -> TensorBoardPanel | None:
    """A live TensorBoard for a run of this kernel or any log directory; what ``%tfos_tensorboard`` does.

    Args:
        runs: this kernel's runs (and the TensorBoards it serves for log directories).
        which: a run's name or run id (default: the newest run); otherwise a log directory: a local
            path, which TensorBoard reads as it is, or a URI (``hdfs://``, ``dbfs:/``, ``s3a://``,
            ``file://``, fsspec URLs) mirrored to the driver (through the active SparkContext's
            Hadoop filesystems when there is one).
        stop: stop that TensorBoard instead (its processes end before this returns).
        display: ``widget`` (return a panel), ``text`` (print the URL) or ``auto`` (as the monitor
            chooses, see ``frontend.choose_monitor``).
        shell: the IPython shell, if any. say: where notes for the user go.

    A run's TensorBoard is the one its monitor shows (started if it has none); a log directory's
    is reused until stopped. Both run until stopped or the kernel exits.

    Returns:
        A :class:`TensorBoardPanel` to display (``widget``), else None.

    Raises:
        ConfigError: ``which`` is neither a run of this kernel nor a directory or URI.
        TensorBoardError: TensorBoard did not start. LogdirError: the URI cannot be read.
    """
    run = runs.find() if not which else runs.get(which)
    label = f"run {run.name}" if run is not None else which
    if stop:
        stopped = run.stop_tensorboard() if run is not None else _stop_logdir_board(runs, _logdir_key(which, runs))
        say(f"[tfos] TensorBoard of {label} stopped" if stopped else f"[tfos] no TensorBoard is running for {label}")
        return None
    board = run.start_tensorboard(wait=True) if run is not None else _logdir_board(runs, _logdir_key(which, runs))
    mode = choose_monitor(display, shell)
    if mode == "widget":
        from .pagewatch import PageWatch, cross_origin_frame
        from .panel import TensorBoardPanel

        panel = TensorBoardPanel()
        panel.show(board.url)
        if cross_origin_frame(board_databricks(run)):
            PageWatch(board.port, panel.reload, done=lambda: board.stopped)
        return panel
    if mode == "text":
        say(f"[tfos] TensorBoard of {label} at {board.url}")
    return None


def board_databricks(run: TrainRun | None):
    """Where on Databricks the TensorBoard's driver runs (None off Databricks)."""
    backend = run.run.backend if run is not None else active_backend()
    return backend.databricks() if backend is not None else None


def _logdir_board(runs: KernelRuns, key: str) -> TensorBoardHandle:
    """The TensorBoard this kernel serves for the log directory ``key``, started if none runs."""
    board = runs.boards.get(key)
    if board is not None and not board.stopped and board.info.alive():
        return board
    _stop_logdir_board(runs, key)
    from ..tensorboard import serve_logdir

    board = runs.boards[key] = serve_logdir(key, active_backend())
    return board


def _stop_logdir_board(runs: KernelRuns, key: str) -> bool:
    """Stop the TensorBoard this kernel serves for ``key``; False when none was running."""
    board = runs.boards.pop(key, None)
    if board is None:
        return False
    running = not board.stopped and board.info.alive()
    board.stop()
    return running


def _logdir_key(logdir: str, runs: KernelRuns) -> str:
    """The resolved local directory, or the URI, that ``logdir`` names."""
    from ..tensorboard.sources import is_uri

    if is_uri(logdir):
        trimmed = logdir.rstrip("/")
        return logdir if trimmed.endswith(":") else trimmed  # a filesystem's root keeps its slashes
    path = os.path.realpath(os.path.expanduser(logdir))
    if not os.path.isdir(path):
        known = ", ".join(r.name for r in runs) or "none yet"
        raise ConfigError(f"{logdir!r} is neither a run of this kernel (runs: {known}) nor a directory: give a "
                          "run's name or id, a log directory, or a URI such as hdfs://... or dbfs:/...")
    return path
