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
"""

from __future__ import annotations

import html
import logging
import threading
from collections.abc import Callable
from typing import Any

from ..runtime.driver.events import Event
from .curves import curves_html
from .panel import DEFAULT_HEIGHT, TensorBoardPanel
from .view import RunView, TaskRow, format_duration, format_gpus, format_progress, format_rate

log = logging.getLogger(__name__)

STATE_COLOURS = {
    "starting": "#6b7280", "reserving": "#b45309", "scheduled": "#6b7280", "registered": "#2563eb",
    "running": "#2563eb", "relaunching": "#b45309", "stopping": "#b45309", "failing": "#b91c1c",
    "finished": "#15803d", "failed": "#b91c1c", "stopped": "#6b7280",
}
TASK_COLUMNS = ("task", "host", "executor", "port", "GPUs", "state", "step", "loss", "steps/s", "input wait")
LOG_STYLE = "border:1px solid #d1d5db;border-radius:3px;padding:2px 6px;background:#f9fafb"
VISIBLE_LOG_LINES = 12


def _badge(state: str) -> str:
    colour = STATE_COLOURS.get(state, "#374151")
    return (f'<span style="color:white;background:{colour};border-radius:3px;padding:0 6px;'
            f'font-size:0.9em">{html.escape(state)}</span>')


def header_html(view: RunView, now: float | None = None) -> str:
    attempt = f" · attempt {view.attempt + 1}" if view.attempt else ""
    attempt += f" · feed {view.feed_path}" if view.feed_path else ""
    return (f"<b>{html.escape(view.name)}</b> {_badge(view.display_state)} "
            f'<span style="color:#6b7280">{format_duration(view.elapsed(now))} · run {html.escape(view.run_id)}'
            f"{attempt}</span>{mlflow_html(view)}")


def mlflow_html(view: RunView) -> str:
    """The run's MLflow run: a link to its page (its id where no UI serves the store), or what went
    wrong with it; empty for a run not logged to MLflow."""
    m = view.mlflow
    if m is None:
        return ""
    if m.url:
        link = (f' · <a class="tfos-mlflow" href="{html.escape(m.url)}" target="_blank" rel="noopener" '
                f'title="The MLflow run of this run">MLflow run</a>')
    elif m.mlflow_run_id:
        link = (f' · <span class="tfos-mlflow" title="{html.escape(m.tracking_uri)}">MLflow run '
                f"{html.escape(m.mlflow_run_id)}</span>")
    else:
        link = ""
    if m.error:
        link += f' <span style="color:#b91c1c" title="{html.escape(m.error)}">(MLflow: {html.escape(m.error)})</span>'
    return link


NOT_MEASURED = ("not measured: the node reads its own data (InputMode.TENSORFLOW), and the wait inside tf.data "
                "shows only in a profile's input-pipeline analysis (Profile)")


def _task_cells(row: TaskRow, pace) -> tuple[str, ...]:
    loss = row.loss
    rate = "-" if pace is None else format_rate(pace.steps_per_sec, "steps").removesuffix(" steps/s")
    wait = "-" if pace is None else "n/m" if pace.wait_share is None else f"{pace.wait_share:.0%}"
    return (row.name, row.host or "-", row.executor_id or "-", str(row.port) if row.port else "-",
            format_gpus(row), row.state, "-" if row.step is None else str(row.step),
            "-" if loss is None else f"{loss:.4g}", rate, wait)


def progress_html(view: RunView, now: float | None = None) -> str:
    """The run's progress bar (where the nodes say how far they are) and its throughput line."""
    p = view.progress()
    if p is None:
        return ""
    bar = ""
    if p.fraction is not None:
        bar = (f'<div class="tfos-progress-bar" style="display:inline-block;width:160px;height:10px;'
               f'background:#e5e7eb;border-radius:3px;margin-right:8px;vertical-align:middle">'
               f'<div style="width:{p.fraction * 100:.1f}%;height:100%;background:#2563eb;border-radius:3px">'
               "</div></div>")
    return (f'<div class="tfos-progress">{bar}<span class="tfos-throughput">'
            f"{html.escape(format_progress(p, view.elapsed(now)))}</span></div>")


def tasks_html(view: RunView) -> str:
    head = "".join(f'<th style="text-align:left;padding:0 8px">{c}</th>' for c in TASK_COLUMNS)
    p = view.progress()
    paces = {n.name: n for n in p.nodes} if p is not None else {}
    rows = []
    for task in sorted(view.rows):
        row = view.rows[task]
        cells = list(map(html.escape, _task_cells(row, paces.get(row.name))))
        cells[5] = _badge(row.state) + (f' <span style="color:#6b7280">{html.escape(row.detail)}</span>'
                                       if row.detail else "")
        if cells[9] == "n/m":
            cells[9] = f'<span title="{html.escape(NOT_MEASURED)}">n/m</span>'
        tds = "".join(f'<td style="padding:0 8px">{c}</td>' for c in cells)
        rows.append(f'<tr data-task="{task}">{tds}</tr>')
    return f'<table style="border-collapse:collapse"><tr>{head}</tr>{"".join(rows)}</table>'


def logs_html(view: RunView, show_noise: bool = False) -> str:
    """The newest log lines the view keeps, as a tail (no scroll box: frontends differ in where
    they scroll to); TensorFlow's known notices only when ``show_noise``."""
    lines = list(view.logs if show_noise else view.quiet_logs)
    if not lines:
        return ""
    shown = view.log_count if show_noise else view.log_count - view.noise_count
    note = (f'<div style="color:#6b7280;font-size:0.85em">last {len(lines)} of {shown} lines; '
            "the run's logs() has the rest</div>" if shown > len(lines) else "")
    text = html.escape("\n".join(lines))
    return f'{note}<div style="{LOG_STYLE}"><pre style="margin:0;font-size:0.85em">{text}</pre></div>'


def run_curves_html(view: RunView) -> str:
    """Each node's reported metrics as small charts (empty before the first report)."""
    return curves_html((row.name, row.curves) for _, row in sorted(view.rows.items()))


def snapshot_html(view: RunView) -> str:
    """The ended run as static HTML (no widget needed): what a saved notebook keeps of it."""
    return (f'<div class="tfos-snapshot" data-run-id="{html.escape(view.run_id)}">'
            f"<div>{header_html(view)}</div>{progress_html(view)}{findings_html(view)}{tasks_html(view)}"
            f"{run_curves_html(view)}"
            f"{logs_html(view)}</div>")


def snapshot_hider_html(run_id: str) -> str:
    """A style rule, put in the live widget, that hides the run's static copy while the widget is
    on the page."""
    return f'<style>.tfos-snapshot[data-run-id="{html.escape(run_id)}"]{{display:none}}</style>'


def findings_html(view: RunView) -> str:
    parts = []
    for f in view.findings:
        evidence = "".join(f"<li>{html.escape(str(e))}</li>" for e in getattr(f, "evidence", ()))
        parts.append(f'<div style="border-left:3px solid #b91c1c;padding-left:6px;margin:4px 0">'
                     f"<b>{html.escape(str(getattr(f, 'cause', f)))}</b><ul style='margin:2px 0'>{evidence}</ul>"
                     f"fix: {html.escape(str(getattr(f, 'remedy', '')))}</div>")
    if view.error and view.state == "failed":
        first = html.escape(view.error.strip().splitlines()[0] if view.error.strip() else "")
        parts.append(f'<div style="color:#b91c1c"><b>failed:</b> {first}</div>')
    return "".join(parts)


class Monitor:
    """A run's live monitor widget.

    Args:
        name, run_id: shown in the header.
        on_stop: called (on a thread of its own) when the Stop button is pressed.
        visible_logs: newest log lines shown in the log area.
        show: displays a mime bundle in the run's cell (IPython's ``display(bundle, raw=True)``
            unless given): the static copy of the ended run goes through it.

    ``on_profile`` (called on a thread of its own by the Profile button, shown while the run
    trains) returns the lines to show under the header.

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
        self._show = show or _display_raw
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
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = self.summary()
        return bundle


def _display_raw(bundle: dict) -> None:
    from IPython.display import display

    display(bundle, raw=True)
