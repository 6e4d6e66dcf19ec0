"""The live TensorBoard of a notebook run (``handle.TrainRun``): started on a thread of its own,
shown in the run's monitor once it answers, kept up after the run ends until stopped."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from .monitor import Monitor
from .pagewatch import PageWatch, cross_origin_frame

if TYPE_CHECKING:
    from ..runtime.driver.run.launch import Run
    from ..tensorboard import TensorBoardHandle


class RunBoard:
    """The TensorBoard of ``run``, recorded in the runs registry by ``registry`` (its
    ``tracker.RunTracker``) and shown in ``monitor`` (the run's, or None) by
    ``to_monitor(show)``, which calls ``show(monitor)`` in the launching cell."""

    def __init__(self, run: Run, registry: Any, monitor: Any,
                 to_monitor: Callable[[Callable[[Any], None]], None]) -> None:
        self.run, self.registry, self.monitor, self.to_monitor = run, registry, monitor, to_monitor
        self._starting: Future | None = None  # of the TensorBoardHandle, while starting and after
        self._lock = threading.Lock()

    def start(self, wait: bool = False) -> TensorBoardHandle | None:
        """Start a live TensorBoard for this run, unless one is running or starting, and show it in
        the monitor once it answers.

        Starting takes seconds, so it happens on a thread of its own; the TensorBoard mirrors the
        nodes' event files (see ``tfos_notebook.tensorboard.attach_tensorboard``) and stays up
        after the run ends, so the panel keeps working, until :meth:`stop` or the
        kernel exits.

        Args:
            wait: block until it answers and return it (else return it only if it already does).

        Raises (with ``wait``): TensorBoardError (it did not start), LogdirError (the run's log
        directory cannot be read from here), ProxyPortError.
        """
        with self._lock:
            starting = self._starting
            if starting is None or (starting.done() and _board(starting) is None):
                if starting is not None and starting.exception() is None:
                    starting.result().stop()  # its process died: let go of its mirror feed
                starting = self._starting = Future()
                threading.Thread(target=self._start, args=(starting,), daemon=True,
                                 name=f"tfos-tensorboard-{self.run.run_id}").start()
        return starting.result() if wait else self.current

    def _start(self, starting: Future) -> None:
        from ..tensorboard import attach_tensorboard

        try:
            board = attach_tensorboard(self.run, keep_after_run=None)
        except Exception as e:  # shown in the panel's place; start(wait=True) raises it
            note = f"TensorBoard did not start: {str(e).splitlines()[0]}"
            self.to_monitor(lambda monitor: monitor.tensorboard_note(note, error=True))
            starting.set_exception(e)
            return
        self.registry.set_tensorboard(board)
        try:
            self.to_monitor(lambda monitor: monitor.show_tensorboard(board.url))
            if isinstance(self.monitor, Monitor) and cross_origin_frame(self.run.backend.databricks()):
                panel = self.monitor.tensorboard_panel
                PageWatch(board.port, lambda: self.to_monitor(lambda _monitor: panel.reload()),
                          done=lambda: board.stopped)
        finally:  # after the monitor shows it: who waits for it finds it shown
            starting.set_result(board)

    @property
    def current(self) -> TensorBoardHandle | None:
        """This run's running TensorBoard (see ``tfos_notebook.tensorboard.TensorBoardHandle``:
        ``url``, ``port``, ``stop()``, ``add_source()``); None when it was not started, is still
        starting, did not start, or was stopped."""
        starting = self._starting
        return _board(starting) if starting is not None and starting.done() else None

    def stop(self) -> bool:
        """Stop this run's TensorBoard (once it answers, if it is starting); False when none was
        running."""
        with self._lock:
            starting, self._starting = self._starting, None
        if starting is None or starting.exception() is not None:
            return False
        board = starting.result()
        running = _board(starting) is not None
        board.stop()
        self.registry.set_tensorboard(None)
        if running:
            note = f"TensorBoard stopped; %tfos_tensorboard {self.run.name} starts it again"
            self.to_monitor(lambda monitor: monitor.tensorboard_note(note))
        return running


def _board(starting: Future) -> TensorBoardHandle | None:
    """The TensorBoard a finished start gave, while it runs (None: it failed, was stopped, or died)."""
    if starting.exception() is not None:
        return None
    board = starting.result()
    return None if board.stopped or not board.info.alive() else board
