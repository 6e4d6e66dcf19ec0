"""The HTML of a run's monitor (``monitor.py``), each part a function of a :class:`~.view.RunView`:
its header, MLflow link, progress, task rows, log tail, curves and findings, and the static copy
a saved notebook keeps."""

from __future__ import annotations

import html

from .curves import curves_html
from .view import RunView, TaskRow, format_duration, format_gpus, format_memory, format_progress, format_rate

STATE_COLOURS = {
    "starting": "#6b7280", "reserving": "#b45309", "scheduled": "#6b7280", "registered": "#2563eb",
    "running": "#2563eb", "relaunching": "#b45309", "stopping": "#b45309", "failing": "#b91c1c",
    "finished": "#15803d", "failed": "#b91c1c", "stopped": "#6b7280",
}
TASK_COLUMNS = ("task", "host", "executor", "port", "GPUs", "memory", "state", "step", "loss", "steps/s", "input wait")
LOG_STYLE = "border:1px solid #d1d5db;border-radius:3px;padding:2px 6px;background:#f9fafb"
VISIBLE_LOG_LINES = 12


def badge(state: str) -> str:
    colour = STATE_COLOURS.get(state, "#374151")
    return (f'<span style="color:white;background:{colour};border-radius:3px;padding:0 6px;'
            f'font-size:0.9em">{html.escape(state)}</span>')


def header_html(view: RunView, now: float | None = None) -> str:
    attempt = f" · attempt {view.attempt + 1}" if view.attempt else ""
    attempt += f" · feed {view.feed_path}" if view.feed_path else ""
    return (f"<b>{html.escape(view.name)}</b> {badge(view.display_state)} "
            f'<span style="color:#6b7280">{format_duration(view.elapsed(now))} · run {html.escape(view.run_id)}'
            f"{attempt}</span>{mlflow_html(view)}")


def attempts_html(view: RunView) -> str:
    """The run's attempts (decommission notices, checkpoints, relaunches), empty for a run of one."""
    if not view.attempts:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in view.attempts)
    return f'<ul class="tfos-attempts" style="margin:2px 0;padding-left:18px;color:#92400e">{items}</ul>'


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
            format_gpus(row), format_memory(row), row.state, "-" if row.step is None else str(row.step),
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
        state, wait = TASK_COLUMNS.index("state"), TASK_COLUMNS.index("input wait")
        cells[state] = badge(row.state) + (f' <span style="color:#6b7280">{html.escape(row.detail)}</span>'
                                           if row.detail else "")
        if cells[wait] == "n/m":
            cells[wait] = f'<span title="{html.escape(NOT_MEASURED)}">n/m</span>'
        tds = "".join(f'<td style="padding:0 8px">{c}</td>' for c in cells)
        rows.append(f'<tr data-task="{task}">{tds}</tr>')
    keras = (f'<div class="tfos-keras" style="color:#6b7280;font-size:0.85em">tf.keras on the nodes: '
             f"{html.escape(view.keras)}</div>" if view.keras else "")
    return f'<table style="border-collapse:collapse"><tr>{head}</tr>{"".join(rows)}</table>{keras}'


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
            f"<div>{header_html(view)}</div>{attempts_html(view)}{progress_html(view)}{findings_html(view)}"
            f"{tasks_html(view)}"
            f"{run_curves_html(view)}"
            f"{logs_html(view)}</div>")


def snapshot_hider_html(run_id: str) -> str:
    """A style rule, put in the live widget, that hides the run's static copy while the widget is
    on the page."""
    return f'<style>.tfos-snapshot[data-run-id="{html.escape(run_id)}"]{{display:none}}</style>'


def profile_warning_html(trainers: int) -> str:
    """What the Profile button's first click says on a run of several training nodes (imported on
    the click: the profile request's modules stay out of the kernel's start)."""
    from ..runtime.driver.run.profiles import CRASH_RISK

    return ("<div style='color:#b35900'>" + html.escape(
        f"This run has {trainers} training nodes: {CRASH_RISK}. A lost node is relaunched from the last "
        "checkpoint if the nodes use ctx.callbacks(); otherwise the run fails. Press \"Profile anyway\" "
        "to record.") + "</div>")


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
