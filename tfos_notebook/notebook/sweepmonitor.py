"""The live view of a sweep: a table of its trials (parameters, state, step, metric, best so far)
and a chart of the metric per trial, as a widget or as text lines.

Both fold the sweep's own events (``search/events.py``) into a :class:`SweepView`; the widget is
core ipywidgets with inline SVG (``curves.chart_svg``), as the run monitor is. Each trial's own
run has its full monitor's data in its events (``Sweep.live``, the runs registry); the sweep
monitor shows the search.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..runtime.driver.events import Event, FindingRaised, MlflowRun, TensorBoardStarted
from ..search.events import SweepFinished, SweepStarted, TrialEnded, TrialPruned, TrialReported, TrialStarted
from .curves import NODE_COLOURS, chart_svg
from .frontend import widget_bundle
from .monitor import display_raw
from .monitorhtml import snapshot_hider_html
from .panel import DEFAULT_HEIGHT, TensorBoardPanel
from .text import print_line
from .view import format_duration

STATE_COLOURS = {"running": "#2563eb", "complete": "#16a34a", "pruned": "#6b7280", "failed": "#dc2626",
                 "stopped": "#ca8a04"}


@dataclass
class TrialRow:
    number: int
    params: dict[str, Any]
    run_name: str
    state: str = "running"
    step: int = 0
    value: float | None = None
    best_so_far: float | None = None  # the sweep's best when this trial ended
    error: str = ""
    resumes: int | None = None
    curve: list[tuple[int, float]] = field(default_factory=list)


class SweepView:
    """What the monitors show of a sweep, folded from its events."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.plan: SweepStarted | None = None
        self.trials: dict[int, TrialRow] = {}
        self.state = "running"
        self.error = ""
        self.best: tuple[int, float] | None = None
        self.findings: list[Any] = []
        self.mlflow_url = ""
        self.tensorboard_url = ""
        self.started = time.time()
        self.ended_at: float | None = None
        self.sweep_id = ""

    def apply(self, e: Event) -> None:
        if isinstance(e, SweepStarted):
            self.plan, self.started, self.sweep_id = e, e.t, e.run_id
        elif isinstance(e, TrialStarted):
            self.trials[e.number] = TrialRow(e.number, e.params, e.trial_name, resumes=e.resumes)
        elif isinstance(e, TrialReported) and e.number in self.trials:
            row = self.trials[e.number]
            row.step, row.value = e.step, e.value
            row.curve.append((e.step, e.value))
        elif isinstance(e, TrialPruned) and e.number in self.trials:
            self.trials[e.number].state = "pruning"
        elif isinstance(e, TrialEnded):
            row = self.trials.setdefault(e.number, TrialRow(e.number, e.params, f"trial-{e.number:03d}"))
            row.state, row.value, row.step, row.error = e.state, e.value, e.step, e.error
            if e.state == "complete" and e.value is not None and (self.best is None or self._better(e.value, self.best[1])):
                self.best = (e.number, e.value)
            row.best_so_far = self.best[1] if self.best else None
        elif isinstance(e, FindingRaised):
            self.findings.append(e.finding)
        elif isinstance(e, MlflowRun):
            self.mlflow_url = e.url
        elif isinstance(e, TensorBoardStarted):
            self.tensorboard_url = e.url
        elif isinstance(e, SweepFinished):
            self.state, self.error, self.ended_at = e.state, e.error, e.t

    def _better(self, a: float, b: float) -> bool:
        return a > b if self.plan is not None and self.plan.direction == "maximize" else a < b

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self.trials.values():
            out[row.state] = out.get(row.state, 0) + 1
        return out

    def headline(self, now: float | None = None) -> str:
        plan = self.plan
        took = format_duration((self.ended_at or now or time.time()) - self.started)
        counts = ", ".join(f"{n} {s}" for s, n in sorted(self.counts().items()))
        total = f"{plan.trials} trials of {plan.workers} worker{'s' if plan.workers != 1 else ''}" if plan else ""
        best = (f"best {plan.metric if plan else ''} {self.best[1]:.4g} (trial {self.best[0]})"
                if self.best else "no trial finished yet")
        return f"sweep {self.name}: {self.state} {took}; {total}; {counts or 'starting'}; {best}"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table_html(view: SweepView) -> str:
    """The trials, newest last: number, parameters, state, step, metric, best so far, error."""
    names = sorted({k for row in view.trials.values() for k in row.params})
    metric = view.plan.metric if view.plan else "metric"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ["trial", *names, "state", "step", metric, "best so far"])
    rows = []
    for row in sorted(view.trials.values(), key=lambda r: r.number):
        colour = STATE_COLOURS.get(row.state, "#2563eb")
        state = html.escape(row.state) + (f" (trial {row.resumes} again)" if row.resumes is not None else "")
        cells = [f"<td>{row.number}</td>", *(f"<td>{html.escape(_fmt(row.params.get(n, '')))}</td>" for n in names),
                 f'<td style="color:{colour}" title="{html.escape(row.error)}">{state}</td>', f"<td>{row.step}</td>",
                 f"<td>{'' if row.value is None else _fmt(row.value)}</td>",
                 f"<td>{'' if row.best_so_far is None else _fmt(row.best_so_far)}</td>"]
        bold = ' style="font-weight:bold"' if view.best is not None and view.best[0] == row.number else ""
        rows.append(f'<tr data-trial="{row.number}" data-state="{html.escape(row.state)}"{bold}>{"".join(cells)}</tr>')
    return (f'<table class="tfos-sweep-trials" style="border-collapse:collapse;font-size:0.9em">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def chart_html(view: SweepView) -> str:
    """The metric of each trial against its steps, one line per trial."""
    metric = view.plan.metric if view.plan else "metric"
    lines = [(f"trial {row.number}", NODE_COLOURS[row.number % len(NODE_COLOURS)], row.curve)
             for row in sorted(view.trials.values(), key=lambda r: r.number)]
    return chart_svg(metric, lines, width=460, height=160)


def errors_html(view: SweepView) -> str:
    parts = [f'<div style="color:#b45309">{html.escape(f.describe(sep=" · "))}</div>' for f in view.findings[-3:]]
    if view.error:
        parts.append(f'<div style="color:#dc2626">{html.escape(view.error)}</div>')
    return "".join(parts)


def header_html(view: SweepView, now: float | None = None) -> str:
    links = f' <a href="{html.escape(view.mlflow_url)}" target="_blank">MLflow</a>' if view.mlflow_url else ""
    return f"<b>{html.escape(view.headline(now))}</b>{links}"


def snapshot_html(view: SweepView) -> str:
    """The ended sweep as static HTML, what a saved notebook keeps (hidden while the widget shows)."""
    return (f'<div class="tfos-snapshot" data-run-id="{html.escape(view.sweep_id)}"><div>{header_html(view)}</div>'
            f"{errors_html(view)}{table_html(view)}{chart_html(view)}</div>")


class SweepMonitor:
    """A sweep's live widget: header, Stop, the trials' table, the metric chart, the sweep's TensorBoard."""

    def __init__(self, name: str, on_stop: Callable[[], Any], show: Callable[[dict], Any] | None = None) -> None:
        import ipywidgets as w

        self.view = SweepView(name)
        self._show = show or display_raw
        self.snapshot_shown = False
        self._lock = threading.Lock()
        self._on_stop = on_stop
        self.header = w.HTML(layout=w.Layout(flex="1 1 auto"))
        self.stop_button = w.Button(description="Stop", icon="stop", button_style="danger",
                                    tooltip="Stop the sweep: no trial starts, the running ones stop (a resume runs "
                                            "them again)", layout=w.Layout(width="auto"))
        self.stop_button.on_click(self._stop_clicked)
        self.tensorboard_panel = TensorBoardPanel()
        self.findings, self.table, self.chart = w.HTML(), w.HTML(), w.HTML()
        self.widget = w.VBox([w.HBox([self.header, self.tensorboard_panel.link, self.tensorboard_panel.toggle,
                                      self.stop_button]), self.findings, self.table, self.chart,
                              self.tensorboard_panel.frame])
        self.update([])

    def update(self, events: list[Event], now: float | None = None) -> None:
        with self._lock:
            for e in events:
                self.view.apply(e)
            v = self.view
            ended = v.state != "running"
            self.header.value = header_html(v, now) + (snapshot_hider_html(v.sweep_id) if ended else "")
            self.findings.value = errors_html(v)
            self.table.value = table_html(v)
            self.chart.value = chart_html(v)
            self.stop_button.disabled = ended
            if ended and not self.snapshot_shown:  # after the widget got the rule that hides it
                self.snapshot_shown = True
                self._show({"text/html": snapshot_html(v), "text/plain": v.headline()})

    def _stop_clicked(self, _button: Any) -> None:
        self.stop_button.disabled = True
        threading.Thread(target=self._on_stop, daemon=True, name="tfos-sweep-stop").start()

    def show_tensorboard(self, url: str, height: int = DEFAULT_HEIGHT) -> None:
        self.tensorboard_panel.show(url, height)

    def tensorboard_note(self, text: str, error: bool = False) -> None:
        self.tensorboard_panel.note(text, error)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        return widget_bundle(self.widget, **kwargs)


class SweepTextMonitor:
    """A sweep's progress as text lines: each trial's start and end, pruning, and the end."""

    def __init__(self, name: str, write: Callable[[str], None] = print_line) -> None:
        self.view = SweepView(name)
        self._write = write

    def update(self, events: list[Event], now: float | None = None) -> None:
        for e in events:
            self.view.apply(e)
            line = self._line(e)
            if line:
                self._write(f"[tfos] {line}")

    def _line(self, e: Event) -> str:
        v = self.view
        metric = v.plan.metric if v.plan else "metric"
        if isinstance(e, SweepStarted):
            again = f", {len(e.requeued)} interrupted trials again" if e.requeued else ""
            done = f"; resumed with {e.done} done{again}" if e.done or e.requeued else ""
            return (f"sweep {e.name}: {e.trials} trials of {e.workers} workers, {e.direction} {e.metric}, sampler "
                    f"{e.sampler}, pruner {e.pruner}{done}")
        if isinstance(e, TrialStarted):
            params = ", ".join(f"{k}={_fmt(val)}" for k, val in e.params.items())
            return f"trial {e.number} started ({params})"
        if isinstance(e, TrialPruned):
            return f"trial {e.number} pruned at step {e.step} ({metric} {e.value:.4g}): stopping it"
        if isinstance(e, TrialEnded) and e.state == "pruned":
            return f"trial {e.number} stopped {e.stop_secs:.1f} s after it was pruned"
        if isinstance(e, TrialEnded):
            value = "" if e.value is None else f" {metric} {e.value:.4g}"
            if e.earlier:
                return f"trial {e.number} {e.state}{value} (before the sweep resumed)"
            why = f": {e.error}" if e.error else ""
            return f"trial {e.number} {e.state}{value}{why}"
        if isinstance(e, FindingRaised):
            return e.finding.describe(sep="; ")
        if isinstance(e, MlflowRun) and e.url:
            return f"MLflow run of the sweep: {e.url}"
        if isinstance(e, SweepFinished):
            return v.headline()
        return ""

    def show_tensorboard(self, url: str, height: int = 600) -> None:
        self._write(f"[tfos] TensorBoard of sweep {self.view.name}: {url}")

    def tensorboard_note(self, text: str, error: bool = False) -> None:
        self._write(f"[tfos] {text}")
