"""The handle ``%%tfos_train`` returns: the run (``tfos_notebook.Run``) plus its monitor.

It wraps the run rather than extending it: everything about the run is delegated, and what it adds
is for the notebook: the monitor (widget or text) fed by the run's events, tracebacks trimmed to
the cell's lines, and output that follows the cell that waits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..cellfn import CellFunction
from ..errors import TFOSError
from ..runtime.driver.events import EventStream, LaunchSubmitted, Log, RunFinished
from ..tracking.run import TrackedRun
from . import tracker
from .capture import cell_error
from .frontend import OutputTarget
from .monitor import Monitor
from .pump import EventPump
from .runboard import RunBoard
from .text import TextMonitor
from .view import timeline

if TYPE_CHECKING:
    from ..runtime.driver.run.profiles import ProfileResult
    from ..tensorboard import TensorBoardHandle

PROFILE_BUTTON_SECS = 5.0  # the monitor's Profile button records this long


class TrainRun:
    """A run launched from a notebook cell.

    Args:
        run: the started runtime run.
        cell: the cell it runs on every node.
        monitor: ``widget``, ``text`` or ``none``.
        target: the cell the monitor writes to (the launching one).

    Offers ``wait()``, ``stop()``, ``state``, ``result``, ``results``, ``error``, ``events``,
    ``timeline`` and ``logs()``; ``monitor`` is the :class:`Monitor` or :class:`TextMonitor` (None with ``none``);
    ``start_tensorboard()``, ``tensorboard``, ``tensorboard_url`` and ``stop_tensorboard()`` for
    the run's live TensorBoard.
    """

    def __init__(self, run: TrackedRun, cell: CellFunction, monitor: str = "widget",
                 target: OutputTarget | None = None) -> None:
        self.run, self.cell = run, cell
        self.target = target or OutputTarget()
        self.monitor: Monitor | TextMonitor | None = None
        if monitor == "widget":
            self.monitor = Monitor(run.name, run.run_id, on_stop=self.stop, on_cleanup=self.kill_leftovers,
                                   on_profile=lambda: self.profile_text(self.profile(seconds=PROFILE_BUTTON_SECS)))
        elif monitor == "text":
            self.monitor = TextMonitor(run.name, run.run_id, result=lambda: run.result)
        self._pump = (EventPump(run.events, self.monitor.update, self.target, name=f"tfos-monitor-{run.run_id}")
                      if self.monitor is not None else None)
        self.registry = tracker.track(run, on_stop=self.stop)  # other kernels and JupyterLab see it
        self.board = RunBoard(run, self.registry, self.monitor, self._to_monitor)  # its live TensorBoard

    def kill_leftovers(self) -> str:
        """Kill processes of earlier runs on the executors (this run's are left alone); a report."""
        from .diagnostics import cleanup_report

        return cleanup_report(self.run.backend, exclude_runs={self.run_id}, kill=True)

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
    def timeline(self) -> dict[str, float]:
        """When the run was ``started``, ``submitted``, every node ``registered``, and reached its
        ``first_step``, ``last_step`` and the end (``finished``), as far as it got, in ``time.time()``
        seconds (see ``notebook.view.timeline``)."""
        return timeline(self.run.events.events())

    @property
    def error(self) -> BaseException | None:
        """Why the run failed: a node's traceback is trimmed to the cell's lines."""
        return cell_error(self.run.error, self.cell.filename)

    def logs(self, node: str | None = None) -> list[str]:
        """Lines the nodes printed (the most recent thousands), as ``[role:index] line``;
        ``node`` (``"worker:0"``) keeps one node's."""
        lines = []
        for e in self.run.events.events(Log):
            if node is None or e.name == node:
                lines.append(e.labelled())
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
        if self.error is not None:
            raise self.error
        return self.result

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the run: its Spark job group is cancelled and its node processes killed."""
        self.run.stop(timeout)

    def progress(self):
        """How the run goes (``Run.progress``): steps/s, examples/s, how far and the ETA; totals once ended."""
        return self.run.progress()

    # -- profiles --------------------------------------------------------------------------------
    def profile(self, seconds: float | None = None, steps: int | None = None,
                nodes: list[str] | None = None) -> ProfileResult:
        """Record a TensorFlow profiler trace of the training on ``nodes`` (default: every running
        node) for ``seconds`` seconds (5 when neither is given) or ``steps`` steps, without stopping
        it; the traces open in the Profile tab of the run's TensorBoard (started if it has none).

        Raises (at once): ProfilePluginMissing (TensorBoard here has no Profile tab), ConfigError
        (the run is not running, or the request is malformed), TensorBoardError.
        """
        from ..tensorboard.profiles import check_profile_plugin

        check_profile_plugin()
        if seconds is None and steps is None:
            seconds = PROFILE_BUTTON_SECS
        if self.run.state == "running" and self.run.file_sink is None:
            self.start_tensorboard(wait=True)
        return self.run.profile(seconds=seconds, steps=steps, nodes=nodes)

    def profile_text(self, result: ProfileResult) -> str:
        """What a profile gave, in a few lines: where the traces are, and why any is missing."""
        from ..tensorboard.profiles import profile_url

        url = self.tensorboard_url
        lines = []
        if result.traces:
            lines.append(f"[tfos] profile {result.session} of {', '.join(sorted(result.traces))} in the Profile tab of "
                         f"run {self.name}'s TensorBoard" + (f": {profile_url(url)}" if url else ""))
        lines += [f"[tfos] no trace from {node}: {why}" for node, why in sorted(result.failures.items())]
        return "\n".join(lines)

    # -- TensorBoard -----------------------------------------------------------------------------
    def start_tensorboard(self, wait: bool = False) -> TensorBoardHandle | None:
        """Start a live TensorBoard for this run, unless one is running or starting, and show it in
        the monitor once it answers (see :meth:`.runboard.RunBoard.start`).

        Raises (with ``wait``): TensorBoardError (it did not start), LogdirError (the run's log
        directory cannot be read from here), ProxyPortError.
        """
        return self.board.start(wait)

    @property
    def tensorboard(self) -> TensorBoardHandle | None:
        """This run's running TensorBoard (see ``tfos_notebook.tensorboard.TensorBoardHandle``:
        ``url``, ``port``, ``stop()``, ``add_source()``); None when it was not started, is still
        starting, did not start, or was stopped."""
        return self.board.current

    @property
    def tensorboard_url(self) -> str | None:
        """Where a browser opens this run's TensorBoard (None without a running one)."""
        board = self.tensorboard
        return board.url if board is not None else None

    def stop_tensorboard(self) -> bool:
        """Stop this run's TensorBoard (once it answers, if it is starting); False when none was
        running."""
        return self.board.stop()

    def _to_monitor(self, show: Callable[[Monitor | TextMonitor], None]) -> None:
        """``show(monitor)`` from a background thread, writing to the launching cell."""
        self.target.show(self.monitor, show)

    def show_tensorboard(self, url: str, height: int = 600) -> None:
        """Show TensorBoard at ``url`` in the monitor."""
        if self.monitor is not None:
            self.monitor.show_tensorboard(url, height)

    # -- display ---------------------------------------------------------------------------------
    def summary(self) -> str:
        nodes = ", ".join(f"{n} {s}" for n, s in self.run.node_states().items())
        return f"run {self.name} ({self.run_id}): {self.state}; {nodes}"

    def __repr__(self) -> str:
        return f"<TrainRun {self.summary()}>"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        if isinstance(self.monitor, Monitor):
            return self.monitor._repr_mimebundle_(**kwargs)
        return {"text/plain": self.summary()}
