"""The control messages a node sends its driver (see :mod:`.messages`)."""

from __future__ import annotations

from dataclasses import field
from typing import TypedDict

from .checks import Offset
from .message import Message, message


@message
class Register(Message):
    """A node reached the driver and holds its TensorFlow port open."""

    TYPE = "register"
    task: int
    attempt: int
    host: str
    port: int
    pid: int
    executor_id: str = ""
    gpus: tuple[str, ...] = ()  # the node's CUDA_VISIBLE_DEVICES
    python: str = ""
    tensorflow: str = ""
    hostname: str = ""
    sees_model_dir: bool = True  # the run's model dir is a local path and the driver's probe file is there
    started: str = ""  # how the node's process started: "fork", or "spawn: " and why not forked (node/task/forked.py)
    keras: str = ""  # which Keras tf.keras is in the node's process: "tf-keras 2.16.0", "keras 3.5.0"...


@message
class NodeStateReport(Message):
    """The node's child process was told to go (``state``: ``running``)."""

    TYPE = "state"
    state: str
    child_pid: int = 0


@message
class Logs(Message):
    """Output lines of the node's process: ``(stream, line)`` with stream ``stdout`` / ``stderr``."""

    TYPE = "logs"
    lines: tuple[tuple[str, str], ...]


@message
class StepReport(Message):
    """Training progress (``ctx.report`` or the Keras callback)."""

    TYPE = "step"
    step: int
    metrics: dict[str, float] = field(default_factory=dict)


@message
class FeedServing(Message):
    """A training node's data feed listens at ``host:port`` (InputMode.SPARK)."""

    TYPE = "feed_serving"
    host: str
    port: int


@message
class FeedReport(Message):
    """A training node's data feed: rows received and consumed, bytes waiting, seconds the
    buffered data has waited, and whether the function called ``terminate()``."""

    TYPE = "feed_progress"
    received: int
    consumed: int
    buffered: int
    stalled: float = 0.0
    terminated: bool = False


#: ``Files.area`` of a node's profiler traces: relpaths ``plugins/profile/<session>/<node>.xplane.pb``
#: under the run's TensorBoard root (the node's log files have area "", under the node's own directory).
PROFILE_AREA = "profile"


@message
class Files(Message):
    """New bytes of files shipped by the node: ``(relpath, offset, data)`` under its own log
    directory (``area`` "") or its profiler traces (``area`` ``PROFILE_AREA``)."""

    TYPE = "files"
    chunks: tuple[tuple[str, Offset, bytes], ...]
    area: str = ""


@message
class PaceReport(Message):
    """How fast the node trains, measured in its process and sent about once a second.

    ``steps`` and ``examples`` count since the function started; over the last ``secs`` seconds it
    ran ``window_steps`` steps of ``step_secs`` each (the median; 0: unknown), took
    ``window_examples`` examples and waited ``wait_secs`` for the next batch from the feed
    (``input_measured``: only the feed of InputMode.SPARK can tell). ``epoch`` (from 0) of
    ``epochs`` and ``epoch_step`` of ``epoch_steps``, or ``step`` of ``total_steps``, say how far
    it is where Keras or ``ctx.report`` tells (0: unknown)."""

    TYPE = "pace"
    steps: Offset
    secs: float
    window_steps: Offset
    step_secs: float = 0.0
    examples: Offset = 0
    window_examples: Offset = 0
    wait_secs: float = 0.0
    input_measured: bool = False
    step: int = 0
    total_steps: Offset = 0
    epoch: Offset = 0
    epochs: Offset = 0
    epoch_step: Offset = 0
    epoch_steps: Offset = 0


@message
class ProfileDone(Message):
    """The node captured a profiler trace for ``session`` (``ok``; its bytes were shipped before
    this message, in ``PROFILE_AREA``) or could not (``detail`` says why)."""

    TYPE = "profile_done"
    session: str
    ok: bool
    detail: str = ""



@message
class AtBoundary(Message):
    """The decommission notice reached the node's training loop at the end of step ``step``; it
    waits there for ``SaveAt`` and ``SaveGo``."""

    TYPE = "at_boundary"
    step: Offset


@message
class SaveAtSeen(Message):
    """The node knows the step to save at (sent by its order thread, not its training loop)."""

    TYPE = "save_at_seen"
    step: Offset


@message
class Saved(Message):
    """The node saved its checkpoint at the end of step ``step`` (``path``: where, on the chief)."""

    TYPE = "saved"
    step: Offset
    path: str = ""


class LeftoverFields(TypedDict):
    """One process of ``Leftovers``, as ``orphans.Leftover``'s fields."""

    host: str
    pid: int
    run_id: str
    task: str
    cmdline: str
    gpus: tuple[str, ...]
    used_mib: int
    killed: bool


@message
class Leftovers(Message):
    """Processes of earlier runs (and foreign GPU holders) on the node's host (``orphans.Leftover``
    fields)."""

    TYPE = "leftovers"
    items: tuple[LeftoverFields, ...]


class GpuFields(TypedDict):
    """One GPU of ``GpuReport``."""

    address: str
    utilization: int
    used_mib: int
    total_mib: int


@message
class GpuReport(Message):
    """Utilisation (percent) and memory of the node's GPUs as NVML reads them, one map per GPU
    address Spark assigned (``GpuFields``)."""

    TYPE = "gpu_stats"
    gpus: tuple[GpuFields, ...]


def host_floor_mib(total_mib: float) -> float:
    """A host's available memory (MiB) below which a growing node is stopped (``node/task/memguard.py``),
    and toward which the driver's ``memory_growing`` finding counts."""
    return max(total_mib / 20, 256.0)


@message
class MemoryReport(Message):
    """The node's process (with what it started) and its host's memory, as the node's memory guard
    reads them (MiB): the process's resident memory, the host's available and total memory, and the
    cap the guard holds it to (0: none). Sent every second or two, whatever else the run does."""

    TYPE = "memory"
    rss_mib: float
    host_available_mib: float
    host_total_mib: float
    cap_mib: float = 0.0


@message
class SystemReport(Message):
    """The node's host as psutil reads it, as MLflow's system metrics do: CPU utilisation
    (percent), memory used (MB of 10^6 bytes) and its share (percent). Sent every few seconds
    while the run is logged to MLflow."""

    TYPE = "system_stats"
    cpu_percent: float
    memory_used_mb: float
    memory_percent: float


@message
class MlflowCalls(Message):
    """MLflow calls the chief's function made (``mlflow.log_metric``, ``mlflow.autolog()``...),
    relayed to the run's MLflow run on the driver: metric points ``(key, value, timestamp ms,
    step)``, params and tags ``(key, value)``."""

    TYPE = "mlflow"
    metrics: tuple[tuple[str, float, int, int], ...] = ()
    params: tuple[tuple[str, str], ...] = ()
    tags: tuple[tuple[str, str], ...] = ()


@message
class ModelExport(Message):
    """The chief exported the trained model (``ctx.export``) as a SavedModel at ``path``; ``keras``
    says what the model was (``keras2``: tf-keras, or TensorFlow's own Keras before 2.16;
    ``keras3``; or ``tf`` for another ``tf.Module``)."""

    TYPE = "model_export"
    path: str
    keras: str


@message
class NodeQuery(Message):
    """From a Spark task that feeds the run (not a node): what became of node ``task``? It asks
    when that node's data feed is gone, to report the node's own failure instead."""

    TYPE = "node_query"
    task: int


@message
class Pong(Message):
    """The answer to a ``Ping``: the node's host is reachable."""

    TYPE = "pong"
    seq: int


@message
class Result(Message):
    """The node's outcome: ``ok`` with the return value (``value``, of type ``value_type``, encoded
    as ``encoding`` says: msgpack, or a pickle for what msgpack cannot carry; see ``values.py``),
    ``stopped`` on request, or neither with the traceback; ``exit_code`` of its process."""

    TYPE = "result"
    ok: bool
    exit_code: int | None = None
    value: bytes | None = None
    value_type: str = ""
    stopped: bool = False
    traceback: str = ""
    encoding: str = "pickle"
    cause: str = ""  # what ended the process when it was not its function: "memory"


