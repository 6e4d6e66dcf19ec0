"""The live monitor of a ``%%tfos_evaluate``, built from core ipywidgets like the run's monitor.

A header (what is evaluated, state, checkpoints done and failed), the metrics per checkpoint step
as curves, and the newest lines the evaluation says. Under nbclient, papermill or a terminal the
evaluation prints those lines instead (no monitor).
"""

from __future__ import annotations

import html
import threading
from collections import deque
from typing import Any

from .curves import curves_html
from .frontend import widget_bundle
from .monitorhtml import LOG_STYLE, badge

VISIBLE_LINES = 8


class EvaluationMonitor:
    """Shows an :class:`~.evaluate.Evaluation`: ``say(line)`` is the evaluation's output, and each
    line re-renders the header and curves from ``evaluation`` (set once it is made).

    ``widget`` is the root box; ``header``, ``curves`` and ``lines`` its parts.
    """

    def __init__(self, visible_lines: int = VISIBLE_LINES) -> None:
        import ipywidgets as w

        self.evaluation: Any = None
        self._lines: deque[str] = deque(maxlen=visible_lines)
        self._lock = threading.Lock()
        self.header = w.HTML()
        self.curves = w.HTML()
        self.lines = w.HTML()
        self.widget = w.VBox([self.header, self.curves, self.lines])

    def say(self, line: str) -> None:
        """Add one of the evaluation's lines and show its latest state."""
        with self._lock:
            self._lines.append(line)
            self.refresh()

    def refresh(self) -> None:
        """Re-render from the evaluation's state and results."""
        ev = self.evaluation
        if ev is None:
            self.header.value = "<b>evaluation</b> " + badge("waiting")
        else:
            failed = f", {len(ev.failures)} failed" if ev.failures else ""
            self.header.value = (f"<b>{html.escape(ev.name)}</b> of run <b>{html.escape(ev.run_name)}</b> "
                                 f"{badge(ev.state)} <span style='color:#6b7280'>{len(ev.results)} "
                                 f"checkpoint{'' if len(ev.results) == 1 else 's'} evaluated{failed}</span>")
            points: dict[str, list[tuple[int, float]]] = {}
            for step, metrics in list(ev.results):
                for metric, value in metrics.items():
                    points.setdefault(metric, []).append((step, value))
            self.curves.value = curves_html([(ev.name, points)])
        text = html.escape("\n".join(self._lines))
        self.lines.value = f'<div style="{LOG_STYLE}"><pre style="margin:0;font-size:0.85em">{text}</pre></div>'

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        return widget_bundle(self.widget, **kwargs)
