"""The typed events of a run (see :mod:`.events`): every one a frozen dataclass with the run id and
a wall-clock time."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ...wire.plan import node_name
from .finding import Finding


def _now() -> float:
    return time.time()


@dataclass(frozen=True)
class Event:
    run_id: str
    t: float = field(default_factory=_now, kw_only=True)


@dataclass(frozen=True)
class NodeEvent(Event):
    """An event of one node: its ``task`` (the barrier task's index), ``role`` and ``index``."""

    task: int
    role: str
    index: int

    @property
    def name(self) -> str:
        """The node as a person names it: ``role:index``."""
        return node_name(self.role, self.index)


@dataclass(frozen=True)
class LaunchSubmitted(Event):
    """The barrier job was submitted: ``roles`` lists the planned ``role:index`` of each task."""

    num_tasks: int
    roles: tuple[str, ...]
    attempt: int = 0


@dataclass(frozen=True)
class Registered(NodeEvent):
    """A node reached the driver and holds its TensorFlow port open."""

    host: str
    executor_id: str
    port: int
    pid: int
    gpus: tuple[str, ...] = ()
    started: str = ""  # how its process started: "fork", or "spawn: " and why it was not forked
    keras: str = ""  # which Keras its tf.keras is ("tf-keras 2.16.0", "keras 3.5.0"; "" if neither)


@dataclass(frozen=True)
class GpuAssigned(NodeEvent):
    """The GPUs a node uses, as its process sees them named (its ``CUDA_VISIBLE_DEVICES``)."""

    host: str
    addresses: tuple[str, ...]


@dataclass(frozen=True)
class GpuStats(NodeEvent):
    """A node's GPUs as NVML last read them: ``gpus`` holds ``(address, utilization percent,
    used MiB, total MiB)`` per GPU Spark assigned to it (sent every few seconds)."""

    host: str
    gpus: tuple[tuple[str, int, int, int], ...]


@dataclass(frozen=True)
class NodeMemory(NodeEvent):
    """A node's process (with what it started) and its host's memory, in MiB, as its memory guard
    read them (every second) on ``host``: resident memory, the host's available and total memory, and
    the process's cap (0: none)."""

    host: str
    rss_mib: float
    host_available_mib: float
    host_total_mib: float
    cap_mib: float = 0.0


@dataclass(frozen=True)
class SystemStats(NodeEvent):
    """A node's host as psutil read it (sent every few seconds while the run is logged to MLflow):
    CPU utilisation and memory use, as MLflow's system metrics name them."""

    cpu_percent: float
    memory_used_mb: float
    memory_percent: float


@dataclass(frozen=True)
class MlflowCalled(NodeEvent):
    """MLflow calls the chief's function made, relayed for the run's MLflow run: metric points
    ``(key, value, timestamp ms, step)``, params and tags ``(key, value)``."""

    metrics: tuple[tuple[str, float, int, int], ...] = ()
    params: tuple[tuple[str, str], ...] = ()
    tags: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ClusterReady(Event):
    """Every node registered; the cluster spec was sent to all of them."""

    cluster_spec: dict[str, list[str]]


@dataclass(frozen=True)
class ModelDirUnshared(Event):
    """The run's model dir is a local path that these ``nodes`` (``worker:1 on host (address)``) do
    not share with the driver: nothing resumes from it, and the driver cannot evaluate it."""

    model_dir: str
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class TaskState(NodeEvent):
    """A node changed state: ``running``, ``finished``, ``failed`` or ``stopped``."""

    state: str
    detail: str = ""


@dataclass(frozen=True)
class Log(NodeEvent):
    """One line the user's function printed on a node (``stream`` is ``stdout`` or ``stderr``)."""

    stream: str
    line: str

    def labelled(self) -> str:
        """The line as shown to a person: ``[role:index] line``."""
        return f"[{self.name}] {self.line}"


@dataclass(frozen=True)
class Step(NodeEvent):
    """Training progress reported by a node (``ctx.report`` or the Keras callback)."""

    step: int
    metrics: dict[str, float]


@dataclass(frozen=True)
class Pace(NodeEvent):
    """How fast a node trains (``messages.PaceReport``, about once a second): over the last
    ``secs`` seconds ``window_steps`` steps of ``step_secs`` each (median; 0: unknown),
    ``window_examples`` examples, ``wait_secs`` waiting for fed data (``input_measured``: only
    InputMode.SPARK's feed can tell); totals ``steps`` and ``examples``; how far it is, where known:
    ``epoch`` (from 0) of ``epochs`` and ``epoch_step`` of ``epoch_steps``, or ``step`` of
    ``total_steps`` (0: unknown)."""

    host: str
    steps: int
    secs: float
    window_steps: int
    step_secs: float = 0.0
    examples: int = 0
    window_examples: int = 0
    wait_secs: float = 0.0
    input_measured: bool = False
    step: int = 0
    total_steps: int = 0
    epoch: int = 0
    epochs: int = 0
    epoch_step: int = 0
    epoch_steps: int = 0


@dataclass(frozen=True)
class ProfileCaptured(NodeEvent):
    """A node's profiler trace of ``session`` is in the run's TensorBoard mirror (``ok``), or the
    node could not capture one (``detail`` says why)."""

    session: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class FindingRaised(Event):
    """A diagnosis of why a launch cannot proceed, or of something that needs attention."""

    finding: Finding


@dataclass(frozen=True)
class RunStateChanged(Event):
    """The run moved to ``state`` (a ``lifecycle.RunState`` value) during ``attempt``; ``error`` is
    the run's error once it is failing or failed."""

    state: str
    error: str = ""
    attempt: int = 0


@dataclass(frozen=True)
class RunFinished(RunStateChanged):
    """The run ended: ``state`` is ``finished``, ``failed`` or ``stopped``."""


@dataclass(frozen=True)
class FeedProgress(NodeEvent):
    """Rows a training node received from Spark and consumed so far (InputMode.SPARK)."""

    received: int
    consumed: int
    buffered_bytes: int
    terminated: bool = False


@dataclass(frozen=True)
class FeedPlanned(Event):
    """How Spark data reaches the nodes (InputMode.SPARK): ``path`` is ``in-stage`` (each node's own
    task feeds it) or ``network`` (separate Spark tasks feed the nodes over the network)."""

    path: str
    detail: str


@dataclass(frozen=True)
class EpochFed(Event):
    """Spark fed one epoch of data to the nodes (InputMode.SPARK)."""

    epoch: int
    epochs: int
    rows: int
    seconds: float


@dataclass(frozen=True)
class ModelExported(NodeEvent):
    """The chief exported the trained model (``ctx.export``) to ``path``, saved by ``keras``
    (``keras2``, ``keras3`` or ``tf``: what loads it back)."""

    path: str
    keras: str


@dataclass(frozen=True)
class TensorBoardStarted(Event):
    """A TensorBoard of the run answers at ``url`` (``tensorboard.attach_tensorboard``)."""

    url: str


@dataclass(frozen=True)
class MlflowRun(Event):
    """The run's MLflow run (``Run(..., mlflow=...)``): ``mlflow_run_id`` in experiment
    ``experiment_id`` of the tracking store ``tracking_uri`` (``url``: its page, empty for a store
    no UI serves). Published when it is created, at its first problem (``error``: what was not
    logged, or why it could not be created), and once ``complete`` (status set, model logged, or
    given up)."""

    mlflow_run_id: str = ""
    experiment_id: str = ""
    tracking_uri: str = ""
    url: str = ""
    error: str = ""
    complete: bool = False


@dataclass(frozen=True)
class Decommissioning(Event):
    """Spark's executor ``executor_id`` on ``host``, which hosts ``nodes`` (``role:index``), is
    decommissioning: the run saves a checkpoint (``runtime/driver/run/decommission.py``)."""

    executor_id: str
    host: str
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class CheckpointSaved(Event):
    """Every training node of ``attempt`` saved the decommission checkpoint at the end of ``step``
    (``path``: where the chief wrote it), ``seconds`` after the notice."""

    attempt: int
    step: int
    path: str
    seconds: float


@dataclass(frozen=True)
class AttemptEnded(Event):
    """Attempt ``attempt`` of ``workers`` training nodes ended and the run is relaunched: ``cause``
    is ``decommission`` (resumed from the checkpoint at ``step``), ``lost`` (a node was lost without
    notice: resumed from the last periodic checkpoint) or ``memory``; ``detail`` says what happened."""

    attempt: int
    workers: int
    cause: str
    detail: str
    step: int | None = None
