"""The live monitor of a run, built from core ipywidgets only.

Databricks renders core widgets but often not third-party ones, so everything here is an HTML,
IntProgress, Button or ToggleButton inside boxes (the TensorBoard panel likewise; the metric curves
are inline SVG). The monitor knows nothing of the runtime beyond
its events: ``update(batch)`` folds them into a :class:`RunView` and pushes only what changed, each
widget's changes in one message (``hold_sync``). The Stop button calls back whoever made it.

A saved notebook keeps a widget's output only as a reference to its model (JupyterLab and Notebook
7 save widget state only when asked to), so a reopened notebook would show no trace of the run. So
once the run has ended the monitor also displays a static copy of itself (header, task rows, curves,
log tail) as plain HTML, which the notebook file keeps. The live widget carries a style rule that
hides that copy while the widget is on the page: a reopened notebook, without the widget, shows it.
The HTML of each part is ``monitorhtml.py``'s.
"""

from __future__ import annotations

import html
import logging
import threading
from collections.abc import Callable
from typing import Any

from ..runtime.driver.events import Event
from ..runtime.wire.plan import FOREGROUND_ROLES
from .frontend import widget_bundle
from .monitorhtml import (
    VISIBLE_LOG_LINES,
    findings_html,
    header_html,
    logs_html,
    profile_warning_html,
    progress_html,
    run_curves_html,
    snapshot_hider_html,
    snapshot_html,
    tasks_html,
)
from .panel import DEFAULT_HEIGHT, TensorBoardPanel
from .view import RunView, format_duration

log = logging.getLogger(__name__)

class Monitor:
    """A run's live monitor widget.

    Args:
        name, run_id: shown in the header.
        on_stop: called (on a thread of its own) when the Stop button is pressed.
        visible_logs: newest log lines shown in the log area.
        show: displays a mime bundle in the run's cell (IPython's ``display(bundle, raw=True)``
            unless given): the static copy of the ended run goes through it.

    ``on_profile`` (called on a thread of its own by the Profile button, shown while the run
    trains) returns the lines to show under the header. On a run of more than one training node
    the first click only warns (TensorFlow's profiler can crash a node of a synchronous
    multi-worker run, docs/insight.md) and the button becomes "Profile anyway".

    ``widget`` is the root box to display; ``header``, ``progress``, ``throughput`` (the progress
    bar, rates and ETA from the nodes' step timing), ``profile_button``, ``tasks``, ``curves`` (the
    metrics each node reported, as charts), ``logs`` (TensorFlow's known notices hidden unless
    ``noise_toggle`` is pressed), ``findings``, ``stop_button`` and ``tensorboard_panel`` (a :class:`TensorBoardPanel` whose
    toggle sits in the header and whose frame is at the bottom) are its parts.
    """

    def __init__(self, name: str, run_id: str, on_stop: Callable[[], Any],
                 visible_logs: int = VISIBLE_LOG_LINES, on_cleanup: Callable[[], str] | None = None,
                 show: Callable[[dict], Any] | None = None, on_profile: Callable[[], str] | None = None) -> None:
        import ipywidgets as w

        self.view = RunView(name, run_id, max_logs=visible_logs)
        self._show = show or display_raw
        self._snapshot_shown = False
        self._on_stop = on_stop
        self._on_cleanup = on_cleanup
        self.cleanup_button = w.Button(description="Kill leftovers", icon="trash", button_style="warning",
                                       tooltip="Kill the processes of earlier runs still alive on the executors",
                                       layout=w.Layout(width="auto", display="none"))
        self.cleanup_result = w.HTML()
        self.cleanup_button.on_click(self._cleanup_clicked)
        self._lock = threading.RLock()
        self.header = w.HTML(layout=w.Layout(flex="1 1 auto"))
        self.stop_button = w.Button(description="Stop", icon="stop", button_style="danger",
                                    tooltip="Stop the run: cancel its Spark job and kill its node processes",
                                    layout=w.Layout(width="auto"))
        self.tensorboard_panel = TensorBoardPanel()
        self._on_profile = on_profile
        self.profile_button = w.Button(description="Profile", icon="tachometer",
                                       tooltip="Record a 5 s TensorFlow profiler trace on every node; it opens in the "
                                               "Profile tab of the run's TensorBoard",
                                       layout=w.Layout(width="auto", display="none"))
        self.profile_button.on_click(self._profile_clicked)
        self.profile_result = w.HTML()
        self.throughput = w.HTML()
        self.progress = w.IntProgress(value=0, min=0, max=1, description="reserved", bar_style="info")
        self.progress_label = w.Label("0/0")
        self.findings = w.HTML()
        self.tasks = w.HTML()
        self.curves = w.HTML()
        self.logs = w.HTML()
        self.noise_toggle = w.ToggleButton(value=False, description="TensorFlow's notices", icon="eye",
                                           tooltip="Show TensorFlow's own start-up notices in the log area",
                                           layout=w.Layout(width="auto", display="none"))
        self.widget = w.VBox([
            w.HBox([self.header, self.profile_button, self.tensorboard_panel.link, self.tensorboard_panel.toggle,
                    self.stop_button]),
            w.HBox([self.progress, self.progress_label]), self.throughput, self.profile_result,
            self.findings, w.HBox([self.cleanup_button, self.cleanup_result]), self.tasks, self.curves,
            self.logs, self.noise_toggle, self.tensorboard_panel.frame,
        ])
        self.stop_button.on_click(self._stop_clicked)
        self.noise_toggle.observe(lambda _change: self.update([]), names="value")
        self.update([])

    # -- updates from the pump -----------------------------------------------------------------
    def update(self, events: list[Event], now: float | None = None) -> None:
        """Fold ``events`` into the view and sync what changed to the frontend."""
        with self._lock:
            for e in events:
                self.view.apply(e)
            self._sync(now)

    def _sync(self, now: float | None) -> None:
        v = self.view
        self.header.value = header_html(v, now) + (snapshot_hider_html(v.run_id) if v.finished else "")
        with self.progress.hold_sync():
            self.progress.max = max(v.requested, 1)
            self.progress.value = v.registered
            self.progress.bar_style = ("danger" if v.state == "failed" else
                                       "success" if v.requested and v.registered == v.requested else "info")
        self.progress_label.value = f"{v.registered}/{v.requested}"
        self.throughput.value = progress_html(v, now)
        self.profile_button.layout.display = "" if self._on_profile and v.state == "running" else "none"
        self.findings.value = findings_html(v)
        leftovers = self._on_cleanup is not None and any(
            getattr(f, "code", "") == "orphan_processes" for f in v.findings)
        self.cleanup_button.layout.display = "" if leftovers else "none"
        self.tasks.value = tasks_html(v)
        self.curves.value = run_curves_html(v)
        self.logs.value = logs_html(v, self.noise_toggle.value)
        with self.noise_toggle.hold_sync():
            self.noise_toggle.layout.display = "" if v.noise_count else "none"
            self.noise_toggle.description = (f"{'Hide' if self.noise_toggle.value else 'Show'} "
                                             f"TensorFlow's notices ({v.noise_count})")
        if v.finished:
            with self.stop_button.hold_sync():
                self.stop_button.disabled = True
                self.stop_button.description = v.state.capitalize()
                self.stop_button.button_style = ""
            if not self._snapshot_shown:  # after the widget got the rule that hides it
                self._snapshot_shown = True
                self._show({"text/html": snapshot_html(v), "text/plain": self.summary()})

    # -- Stop ----------------------------------------------------------------------------------
    def _stop_clicked(self, _button: Any = None) -> None:
        with self._lock:
            if self.view.finished or self.view.stop_requested:
                return
            self.view.stop_requested = True
            with self.stop_button.hold_sync():
                self.stop_button.disabled = True
                self.stop_button.description = "Stopping…"
            self._sync(None)
        # The click arrives on the kernel's main thread; stopping takes seconds, so it must not block it.
        threading.Thread(target=self._stop, daemon=True, name="tfos-stop").start()

    def _stop(self) -> None:
        try:
            self._on_stop()
        except Exception as e:  # shown in the monitor; the button's thread must end either way
            log.warning("stopping the run from the monitor failed", exc_info=True)
            with self._lock:
                self.view.logs.append(f"[tfos] stop failed: {e}")
                self._sync(None)

    def _profile_clicked(self, _button: Any = None) -> None:
        trainers = sum(1 for r in self.view.rows.values() if r.role in FOREGROUND_ROLES)
        if trainers > 1 and self.profile_button.description == "Profile":
            self.profile_button.description = "Profile anyway"
            self.profile_result.value = profile_warning_html(trainers)
            return
        self._in_background(self.profile_button, self.profile_result, "recording a profile on every node…",
                            self._on_profile, "profile")

    def _cleanup_clicked(self, _button: Any = None) -> None:
        self._in_background(self.cleanup_button, self.cleanup_result, "killing leftovers…", self._on_cleanup,
                            "cleanup")

    def _in_background(self, button: Any, out: Any, busy: str, action: Callable[[], str], what: str) -> None:
        """Run a button's ``action`` on a thread of its own (a click arrives on the kernel's main
        thread) and show the text it returns, or why it failed, in ``out``."""
        button.disabled = True
        out.value = busy

        def work() -> None:
            try:
                text = action()
            except Exception as e:  # shown in the monitor; the button's thread must end either way
                log.warning("the monitor's %s failed", what, exc_info=True)
                text = f"{what} failed: {e}"
            out.value = f"<pre style='margin:0;font-size:0.85em'>{html.escape(text)}</pre>"
            button.disabled = False

        threading.Thread(target=work, daemon=True, name=f"tfos-{what}").start()

    # -- TensorBoard ---------------------------------------------------------------------------
    def show_tensorboard(self, url: str, height: int = DEFAULT_HEIGHT) -> None:
        """Show TensorBoard at ``url`` in an iframe below the run, with a show/hide toggle and a
        link that opens it in a new tab."""
        self.tensorboard_panel.show(url, height)

    def tensorboard_note(self, text: str, error: bool = False) -> None:
        """Say in the TensorBoard panel's place that it stopped or could not start."""
        self.tensorboard_panel.note(text, error)

    # -- display -------------------------------------------------------------------------------
    def summary(self) -> str:
        v = self.view
        return f"run {v.name}: {v.display_state}, {v.registered}/{v.requested} reserved, {format_duration(v.elapsed())}"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        bundle = widget_bundle(self.widget, **kwargs)
        bundle["text/plain"] = self.summary()
        return bundle


def display_raw(bundle: dict) -> None:
    from IPython.display import display

    display(bundle, raw=True)
