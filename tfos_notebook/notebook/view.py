"""What a run looks like to a person, folded from its event stream.

``RunView.apply(event)`` is the only way state gets in, so the widget and the text renderer show
the same thing and both can be tested by feeding events. Pure Python: no widgets here.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..runtime.driver.diagnosis.insight import PaceBoard, Progress
from ..runtime.driver.events import (
    AttemptEnded,
    CheckpointSaved,
    ClusterReady,
    Decommissioning,
    Event,
    FeedPlanned,
    FindingRaised,
    GpuAssigned,
    GpuStats,
    LaunchSubmitted,
    Log,
    MlflowRun,
    NodeMemory,
    Pace,
    Registered,
    RunFinished,
    RunStateChanged,
    Step,
    TaskState,
)
from ..runtime.wire.plan import node_name
from .logfilter import is_noise

MAX_LOG_LINES = 200
MAX_CURVE_POINTS = 400


@dataclass
class TaskRow:
    """One node of the run as the monitor lists it."""

    task: int
    role: str
    index: int
    host: str = ""
    executor_id: str = ""
    port: int = 0
    gpus: tuple[str, ...] = ()
    state: str = "scheduled"
    detail: str = ""
    step: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    curves: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    gpu_stats: tuple[tuple[str, int, int, int], ...] = ()
    memory: NodeMemory | None = None  # its process's memory, as its memory guard last read it
    keras: str = ""  # which Keras its tf.keras is ("tf-keras 2.16.0"), as it registered

    def add_point(self, step: int, metrics: dict[str, float]) -> None:
        """Keep ``(step, value)`` of each metric; past ``MAX_CURVE_POINTS`` every other old point goes."""
        for name, value in metrics.items():
            points = self.curves.setdefault(name, [])
            points.append((step, value))
            if len(points) > MAX_CURVE_POINTS:
                points[:] = points[:-1:2] + points[-1:]

    @property
    def name(self) -> str:
        return node_name(self.role, self.index)

    @property
    def loss(self) -> float | None:
        return self.metrics.get("loss")


class RunView:
    """A run's state for display: header, reservations, task rows with their metric curves, recent
    log lines, findings.

    ``logs`` keeps every recent line; ``quiet_logs`` the same less TensorFlow's known notices
    (``logfilter.is_noise``), of which ``noise_count`` were seen.

    Args:
        name: the run's name. run_id: its id.
        max_logs: log lines kept (the oldest are dropped).
    """

    def __init__(self, name: str, run_id: str, max_logs: int = MAX_LOG_LINES) -> None:
        self.name, self.run_id = name, run_id
        self.state = "starting"
        self.requested = 0
        self.attempt = 0
        self.rows: dict[int, TaskRow] = {}
        self.logs: deque[str] = deque(maxlen=max_logs)
        self.quiet_logs: deque[str] = deque(maxlen=max_logs)
        self.log_count = 0
        self.noise_count = 0
        self.findings: list = []
        self.error = ""
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.stop_requested = False
        self.feed_path = ""  # in-stage or network, once Spark data is fed (InputMode.SPARK)
        self.mlflow: MlflowRun | None = None  # the run's MLflow run, once logged there
        self.input_mode = ""  # "spark" once data is fed: the nodes' wait for it is measured
        self.paces = PaceBoard()
        self.running_at: float | None = None
        self.attempts: list[str] = []  # the run's relaunches, a line each (attempt_line)

    def progress(self) -> Progress | None:
        """The run's pace (rates, how far, ETA; the totals once ended), None before any node timed a step."""
        return self.paces.progress(ended=self.finished) if self.paces else None

    @property
    def registered(self) -> int:
        return sum(1 for r in self.rows.values() if r.host)

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    @property
    def display_state(self) -> str:
        """The state to show: ``stopping`` between a stop request and the end."""
        return "stopping" if self.stop_requested and not self.finished else self.state

    def elapsed(self, now: float | None = None) -> float:
        if self.started_at is None:
            return 0.0
        end = self.finished_at if self.finished_at is not None else (now if now is not None else time.time())
        return max(0.0, end - self.started_at)

    def _row(self, e: Registered | GpuAssigned | GpuStats | NodeMemory | TaskState | Step) -> TaskRow:
        if e.task not in self.rows:
            self.rows[e.task] = TaskRow(e.task, e.role, e.index)
        return self.rows[e.task]

    @property
    def keras(self) -> str:
        """Which Keras ``tf.keras`` is on the nodes ("tf-keras 2.16.0"; several, comma-separated,
        where nodes differ; "" before any registered)."""
        return ", ".join(sorted({r.keras for r in self.rows.values() if r.keras}))

    def apply(self, e: Event) -> None:
        """Fold one event into the view."""
        if self.started_at is None:
            self.started_at = e.t
        if isinstance(e, RunStateChanged):
            self.state = e.state
            if e.state == "running" and self.running_at is None:
                self.running_at = e.t
            if isinstance(e, RunFinished):
                self.error, self.finished_at = e.error, e.t
        elif isinstance(e, LaunchSubmitted):
            if e.attempt:
                self.attempts.append(attempt_line(e))
            self.requested, self.attempt = e.num_tasks, e.attempt
            if e.attempt:
                self.paces.reset()
            for task, name in enumerate(e.roles):
                role, _, index = name.partition(":")
                if e.attempt or task not in self.rows:  # a relaunch starts every row afresh
                    self.rows[task] = TaskRow(task, role, int(index or 0))
        elif isinstance(e, Registered):
            row = self._row(e)
            row.host, row.executor_id, row.port, row.state = e.host, e.executor_id, e.port, "registered"
            row.gpus, row.keras = e.gpus or row.gpus, e.keras
        elif isinstance(e, GpuAssigned):
            self._row(e).gpus = e.addresses
        elif isinstance(e, GpuStats):
            self._row(e).gpu_stats = e.gpus
        elif isinstance(e, NodeMemory):
            self._row(e).memory = e
        elif isinstance(e, TaskState):
            row = self._row(e)
            row.state, row.detail = e.state, e.detail
        elif isinstance(e, Step):
            row = self._row(e)
            row.step, row.metrics = e.step, dict(e.metrics)
            row.add_point(e.step, e.metrics)
        elif isinstance(e, Log):
            line = e.labelled()
            self.logs.append(line)
            self.log_count += 1
            if is_noise(e.line):
                self.noise_count += 1
            else:
                self.quiet_logs.append(line)
        elif isinstance(e, FindingRaised):
            self.findings.append(e.finding)
        elif isinstance(e, Pace):
            self.paces.add(e)
        elif isinstance(e, FeedPlanned):
            self.feed_path = e.path
        elif isinstance(e, MlflowRun):
            self.mlflow = e
        elif isinstance(e, (Decommissioning, CheckpointSaved, AttemptEnded)):
            self.attempts.append(attempt_line(e))


CAUSES = {"decommission": "its executor decommissioned", "lost": "a node was lost", "memory": "a node ran out of memory"}


def attempt_line(e: LaunchSubmitted | Decommissioning | CheckpointSaved | AttemptEnded) -> str:
    """One line of the run's attempts (the monitor lists them; the runs sidebar shows them too)."""
    if isinstance(e, Decommissioning):
        return f"executor {e.executor_id} on {e.host} is decommissioning ({', '.join(e.nodes)})"
    if isinstance(e, CheckpointSaved):
        return f"checkpoint saved at step {e.step}, {e.seconds:.1f}s after the notice"
    if isinstance(e, AttemptEnded):
        resumed = f", resumed from step {e.step}" if e.step is not None else ", resumed from the last checkpoint"
        return f"attempt {e.attempt + 1} ({e.workers} training nodes) ended: {CAUSES.get(e.cause, e.cause)}{resumed}"
    return f"attempt {e.attempt + 1}: {e.num_tasks} nodes ({', '.join(e.roles)})"


def format_gpus(row: TaskRow) -> str:
    """The node's GPUs: ``no GPU`` on a CPU node; each address, with utilisation and memory where
    the node's NVML reported them (``0: 87% 3.1/16 GiB``)."""
    if not row.gpus and not row.gpu_stats:
        return "no GPU"
    stats = {address: (util, used, total) for address, util, used, total in row.gpu_stats}
    parts = []
    for address in row.gpus or tuple(stats):
        if address in stats:
            util, used, total = stats[address]
            parts.append(f"{address}: {util}% {used / 1024:.1f}/{total / 1024:.0f} GiB")
        else:
            parts.append(address)
    return ", ".join(parts)


def format_memory(row: TaskRow) -> str:
    """The node's process's resident memory, of its cap where it has one (``1.2/4.0 GiB``), and
    the host's available memory when it runs low (``· host 0.3 GiB free``); ``-`` before a reading."""
    mem = row.memory
    if mem is None:
        return "-"
    text = f"{mem.rss_mib / 1024:.1f}/{mem.cap_mib / 1024:.1f} GiB" if mem.cap_mib else f"{mem.rss_mib / 1024:.1f} GiB"
    if mem.host_available_mib < mem.host_total_mib / 10:
        text += f" · host {mem.host_available_mib / 1024:.1f} GiB free"
    return text


def format_duration(seconds: float) -> str:
    """``75.2`` -> ``1:15``; ``3700`` -> ``1:01:40`` (a negative duration, from clock skew, is ``0:00``)."""
    s = max(0, int(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def format_rate(rate: float, unit: str) -> str:
    """``12.3 steps/s``, ``1.2k examples/s``."""
    return f"{rate / 1000:.1f}k {unit}/s" if rate >= 10_000 else f"{rate:.3g} {unit}/s"


def format_progress(p: Progress, elapsed: float) -> str:
    """One line: how far (epoch and step where known), the rates in total, elapsed and ETA;
    on an ended run the totals: ``epoch 2/3 step 4/8 (50%) · 8 steps/s · 512 examples/s · 0:12 · ETA 0:03``."""
    parts = []
    behind = p.behind
    if behind is not None:
        where = (f"epoch {behind.epoch + 1}/{behind.epochs} step {behind.epoch_step}/{behind.epoch_steps}"
                 if behind.epoch_steps else f"step {behind.done}/{behind.planned}")
        parts.append(f"{where} ({p.fraction:.0%})")
    if p.ended:  # the steps of the node that ran most, the examples of all
        steps = max(n.steps for n in p.nodes)
        examples = sum(n.examples for n in p.nodes)
        parts.append(f"{steps} steps" + (f", {examples} examples" if examples else ""))
    parts.append(format_rate(p.steps_per_sec, "steps"))
    if p.examples_per_sec:
        parts.append(format_rate(p.examples_per_sec, "examples"))
    parts.append(f"{'took' if p.ended else 'elapsed'} {format_duration(elapsed)}")
    if p.eta is not None:
        parts.append(f"ETA {format_duration(p.eta)}")
    return " · ".join(parts)


def format_metrics(step: int | None, metrics: dict[str, float]) -> str:
    """``step 120  loss 0.3123  acc 0.91`` (empty when nothing was reported)."""
    if step is None:
        return ""
    parts = [f"step {step}"] + [f"{k} {v:.4g}" for k, v in metrics.items()]
    return "  ".join(parts)


def timeline(events: Iterable[Event]) -> dict[str, float]:
    """When a run reached each milestone (wall-clock ``time.time()`` seconds), from its events in
    time order: ``started`` (it was started), ``submitted`` (its barrier job went to Spark),
    ``registered`` (every node reached the driver: Spark's barrier tasks, their Python workers and
    the nodes' processes are up), ``first_step`` (a node's first progress report, which comes after
    its imports, its strategy's set-up and its first epoch or step), ``last_step`` and
    ``finished``. Milestones not reached yet are left out."""
    marks: dict[str, float] = {}
    for e in events:
        if isinstance(e, Step):
            marks.setdefault("first_step", e.t)
            marks["last_step"] = e.t
        elif isinstance(e, RunFinished):
            marks["finished"] = e.t
        else:
            name = {RunStateChanged: "started", LaunchSubmitted: "submitted", ClusterReady: "registered"}.get(type(e))
            if name is not None:
                marks.setdefault(name, e.t)
    order = ("started", "submitted", "registered", "first_step", "last_step", "finished")
    return {name: marks[name] for name in order if name in marks}
