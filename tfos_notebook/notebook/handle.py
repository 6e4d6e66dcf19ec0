"""The handle ``%%tfos_train`` returns: the runtime's :class:`Run` plus its monitor.

It wraps the run rather than extending it: everything about the run is delegated, and what it adds
is for the notebook: the monitor (widget or text) fed by the run's events, tracebacks trimmed to
the cell's lines, and output that follows the cell that waits.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..runtime.errors import TFOSError
from ..runtime.events import EventStream, LaunchSubmitted, Log, RunFinished
from ..runtime.launch import Run
from .capture import CellFunction, cell_error
from .frontend import OutputTarget
from .monitor import Monitor
from .pump import EventPump
from .text import TextMonitor


class TrainRun:
    """A run launched from a notebook cell.

    Args:
        run: the started runtime run.
        cell: the cell it runs on every node.
        monitor: ``widget``, ``text`` or ``none``.
        target: the cell the monitor writes to (the launching one).

    Offers ``wait()``, ``stop()``, ``state``, ``result``, ``results``, ``error``, ``events`` and
    ``logs()``; ``monitor`` is the :class:`Monitor` or :class:`TextMonitor` (None with ``none``).
    """

    def __init__(self, run: Run, cell: CellFunction, monitor: str = "widget",
                 target: OutputTarget | None = None) -> None:
        self.run, self.cell = run, cell
        self.target = target or OutputTarget()
        self.feed_error: BaseException | None = None
        self._feed_thread: threading.Thread | None = None
        self.monitor: Monitor | TextMonitor | None = None
        if monitor == "widget":
            self.monitor = Monitor(run.name, run.run_id, on_stop=self.stop)
        elif monitor == "text":
            self.monitor = TextMonitor(run.name, run.run_id, result=lambda: run.result)
        self._pump = (EventPump(run.events, self.monitor.update, self.target, name=f"tfos-monitor-{run.run_id}")
                      if self.monitor is not None else None)

    # -- the run ---------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.run.name

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def state(self) -> str:
        """``reserving``, ``running``, ``finished``, ``failed`` or ``stopped``."""
        return self.run.state

    @property
    def done(self) -> bool:
        return self.run.done

    @property
    def result(self) -> Any:
        """The chief's return value (worker 0's without a chief)."""
        return self.run.result

    @property
    def results(self) -> dict[str, Any]:
        """Return values of the nodes that finished, by ``role:index``."""
        return self.run.results

    @property
    def elapsed(self) -> float:
        """Seconds from the launch to the end (or to now)."""
        launched = self.run.events.events(LaunchSubmitted)
        if not launched:
            return 0.0
        ended = self.run.events.events(RunFinished)
        return max(0.0, (ended[-1].t if ended else time.time()) - launched[0].t)

    @property
    def events(self) -> EventStream:
        return self.run.events

    @property
    def error(self) -> BaseException | None:
        """Why the run failed: a node's traceback is trimmed to the cell's lines."""
        return self.feed_error or cell_error(self.run.error, self.cell.filename)

    def logs(self, node: str | None = None) -> list[str]:
        """Lines the nodes printed (the most recent thousands), as ``[role:index] line``;
        ``node`` (``"worker:0"``) keeps one node's."""
        lines = []
        for e in self.run.events.events(Log):
            name = f"{e.role}:{e.index}"
            if node is None or name == node:
                lines.append(f"[{name}] {e.line}")
        return lines

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the run ends and return the chief's value.

        While waiting, the text monitor writes into the waiting cell. Raises the run's error:
        ``NodeError`` (traceback from the cell's line), ``ReservationTimeout``, ``RunStopped``...
        """
        with self.target.follow_caller():
            try:
                self.run.wait(timeout)
            except TFOSError:
                pass  # raised below, with a node's traceback trimmed to the cell
            if self._pump is not None:
                self._pump.join(timeout=5)  # the monitor's last lines land in this cell
        if self._feed_thread is not None:
            self._feed_thread.join()
        if self.error is not None:
            raise self.error
        return self.result

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the run: its Spark job group is cancelled and its node processes killed."""
        self.run.stop(timeout)

    # -- input mode spark ------------------------------------------------------------------------
    def feed(self, data: Any, num_epochs: int) -> None:
        """Feed ``data`` to the nodes with ``run.train`` on a background thread."""
        self._feed_thread = threading.Thread(target=self._feed, args=(data, num_epochs), daemon=True,
                                             name=f"tfos-feed-{self.run_id}")
        self._feed_thread.start()

    def _feed(self, data: Any, num_epochs: int) -> None:
        try:
            self.run.train(data, num_epochs=num_epochs)
        except Exception as e:  # the nodes would wait for data forever: end the run
            if not self.run.done:
                self.feed_error = e
                self.run.stop()

    # -- TensorBoard and display -----------------------------------------------------------------
    def show_tensorboard(self, url: str, height: int = 600) -> None:
        """Show TensorBoard at ``url`` in the monitor."""
        if self.monitor is not None:
            self.monitor.show_tensorboard(url, height)

    def summary(self) -> str:
        nodes = ", ".join(f"{n} {s}" for n, s in self.run.node_states().items())
        return f"run {self.name} ({self.run_id}): {self.state}; {nodes}"

    def __repr__(self) -> str:
        return f"<TrainRun {self.summary()}>"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        if isinstance(self.monitor, Monitor):
            return self.monitor._repr_mimebundle_(**kwargs)
        return {"text/plain": self.summary()}
