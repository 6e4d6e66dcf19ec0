"""The monitor as text, for places with no widget frontend (nbclient, papermill, terminal IPython).

The same events as the widget, printed as a few concise lines: reservation count changes, state
changes, a step/metrics line and a progress line (how far, steps/s, examples/s, elapsed, ETA) at
most every ``step_every`` seconds each, findings, and the end with the run's totals. Node log
lines are not printed (they stay available from the run handle), so a chatty run cannot flood the
notebook.
"""

from __future__ import annotations

import reprlib
import sys
from collections.abc import Callable
from typing import Any

from ..runtime.driver.events import (
    ClusterReady,
    Event,
    FeedPlanned,
    FindingRaised,
    LaunchSubmitted,
    MlflowRun,
    Pace,
    RunFinished,
    Step,
    TaskState,
)
from .view import RunView, format_duration, format_metrics, format_progress

PREFIX = "[tfos]"
STEP_EVERY_SECONDS = 5.0


def print_line(line: str) -> None:
    print(line, file=sys.stdout, flush=True)


class TextMonitor:
    """Prints a run's progress as lines.

    Args:
        name, run_id: the run.
        write: where each line goes (``print`` to the current cell by default).
        result: returns the run's value, printed when it finishes.
        step_every: least seconds (event time) between two step lines.
    """

    def __init__(self, name: str, run_id: str, write: Callable[[str], None] = print_line,
                 result: Callable[[], Any] | None = None, step_every: float = STEP_EVERY_SECONDS) -> None:
        self.view = RunView(name, run_id)
        self.write, self.result, self.step_every = write, result, step_every
        self._shown_registered = 0
        self._last_step_t: float | None = None
        self._mlflow_shown = False
        self._mlflow_error = ""
        self._last_pace_t: float | None = None

    def _say(self, text: str) -> None:
        self.write(f"{PREFIX} {self.view.name}: {text}")

    def update(self, events: list[Event], now: float | None = None) -> None:
        """Fold ``events`` into the view and print what a person should know about them."""
        states: dict[str, list[str]] = {}
        step: Step | None = None
        paced, pace_t = False, 0.0
        for e in events:
            self.view.apply(e)
            if isinstance(e, Pace):
                pace_t = e.t
                if self._last_pace_t is None or e.t - self._last_pace_t >= self.step_every:
                    self._last_pace_t, paced = e.t, True
            if isinstance(e, LaunchSubmitted):
                again = f" again (attempt {e.attempt + 1})" if e.attempt else ""
                self._say(f"launching {e.num_tasks} nodes{again} ({', '.join(e.roles)})")
            elif isinstance(e, ClusterReady):
                self._flush_registered()
                keras = f" (tf.keras: {self.view.keras})" if self.view.keras else ""
                self._say("cluster ready: " + ", ".join(f"{r.name} {r.host}:{r.port}" for r in
                                                         sorted(self.view.rows.values(), key=lambda r: r.task)) + keras)
            elif isinstance(e, TaskState):
                detail = f" ({e.detail})" if e.detail else ""
                states.setdefault(e.state, []).append(f"{e.name}{detail}")
            elif isinstance(e, Step):  # the first node's latest step, at most every step_every seconds
                due = self._last_step_t is None or e.t - self._last_step_t >= self.step_every
                if due and (step is None or e.task <= step.task):
                    step = e
            elif isinstance(e, FeedPlanned):
                self._say(f"feeding {e.detail}")
            elif isinstance(e, FindingRaised):
                self._say(e.finding.describe(evidence=False, sep="; "))
            elif isinstance(e, MlflowRun):
                self._mlflow(e)
            elif isinstance(e, RunFinished):
                self._flush(states, step)
                states, step, paced = {}, None, False
                self._finished(e)
        self._flush(states, step)
        progress = self.view.progress()
        if paced and progress is not None and not self.view.finished:
            self._say(format_progress(progress, self.view.elapsed(now if now is not None else pace_t)))

    def _flush_registered(self) -> None:
        if self.view.registered != self._shown_registered:
            self._shown_registered = self.view.registered
            self._say(f"reserved {self.view.registered}/{self.view.requested}")

    def _flush(self, states: dict[str, list[str]], step: Step | None) -> None:
        self._flush_registered()
        for state, names in states.items():
            self._say(f"{', '.join(names)} {state}")
        if step is not None:
            self._last_step_t = step.t
            self._say(f"{format_metrics(step.step, step.metrics)} ({step.name})")

    def _finished(self, e: RunFinished) -> None:
        took = format_duration(self.view.elapsed())
        stepped = [r for r in sorted(self.view.rows.values(), key=lambda r: r.task) if r.step is not None]
        if stepped:
            took += f" ({format_metrics(stepped[0].step, stepped[0].metrics)})"
        if e.state == "finished":
            value = self.result() if self.result is not None else None
            self._say(f"finished in {took}" + (f"; result: {reprlib.repr(value)}" if value is not None else ""))
        else:
            self._finished_other(e, took)
        progress = self.view.progress()
        if progress is not None:
            self._say(f"throughput: {format_progress(progress, self.view.elapsed())}")

    def _finished_other(self, e: RunFinished, took: str) -> None:
        if e.state == "failed":
            lines = e.error.strip().splitlines() or ["no error message"]
            summary = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1].strip()}"
            self._say(f"failed after {took}: {summary}")
        else:
            self._say(f"{e.state} after {took}")

    def _mlflow(self, e: MlflowRun) -> None:
        """The MLflow run's link once it exists, and its first problem."""
        if e.mlflow_run_id and not self._mlflow_shown:
            self._mlflow_shown = True
            self._say(f"MLflow run at {e.url}" if e.url else f"MLflow run {e.mlflow_run_id} in {e.tracking_uri}")
        if e.error and e.error != self._mlflow_error:
            self._mlflow_error = e.error
            self._say(f"MLflow: {e.error}")

    def show_tensorboard(self, url: str, height: int = 600) -> None:
        """Print where TensorBoard is (text has no room for the panel)."""
        self._say(f"TensorBoard at {url}")

    def tensorboard_note(self, text: str, error: bool = False) -> None:
        """Print that TensorBoard stopped or could not start."""
        self._say(text)
