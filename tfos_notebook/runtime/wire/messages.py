"""The control protocol: one frozen dataclass per message between the driver and a node.

On the wire a message is a msgpack (control channel) or JSON (the child's status pipe) map
``{"type": TYPE, field: value, ...}``. :func:`decode` validates every field's type and raises
``ChannelError`` on anything else, so a handler only ever sees a well-formed message; the
receiver logs and counts a malformed one and goes on (it never costs the sender its node).
Nothing here is unpickled: a node's return value travels as opaque bytes in :class:`Result` and
only the driver's run unpickles it, reporting a value it cannot unpickle as that node's error.

Field checks are in ``checks.py``. Imports nothing but the standard library, ``checks`` and ``errors``: the
nodes' child processes use it.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, ClassVar

from . import checks as c
from .checks import Check
from .errors import ChannelError

# Heartbeats: the driver pings every registered node each HEARTBEAT_SECS; a node it has not heard
# from (any message) for NODE_SILENT_SECS is lost with its host (a cut network, a frozen machine),
# and a node that has had no ping for DRIVER_SILENT_SECS ends its process (the driver is gone).
HEARTBEAT_SECS = 2.0
NODE_SILENT_SECS = 10.0
DRIVER_SILENT_SECS = 30.0


class Message:
    """Base of every control message; ``TYPE`` is its tag on the wire and ``CHECKS`` validates
    each field (a field without a check is not sent by the peer)."""

    TYPE: ClassVar[str] = ""
    CHECKS: ClassVar[dict[str, Check]] = {}


_TYPES: dict[str, type] = {}


def _message(cls):
    cls = dataclass(frozen=True)(cls)
    _TYPES[cls.TYPE] = cls
    return cls


# -- node -> driver ----------------------------------------------------------------------------

@_message
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
    CHECKS = {"task": c.integer, "attempt": c.integer, "host": c.string, "port": c.integer, "pid": c.integer,
              "executor_id": c.string, "gpus": c.seq(c.string), "python": c.string, "tensorflow": c.string,
              "hostname": c.string, "sees_model_dir": c.boolean}


@_message
class NodeStateReport(Message):
    """The node's child process was told to go (``state``: ``running``)."""

    TYPE = "state"
    state: str
    child_pid: int = 0
    CHECKS = {"state": c.string, "child_pid": c.integer}


@_message
class Logs(Message):
    """Output lines of the node's process: ``(stream, line)`` with stream ``stdout`` / ``stderr``."""

    TYPE = "logs"
    lines: tuple[tuple[str, str], ...]
    CHECKS = {"lines": c.seq(c.fixed(c.string, c.string))}


@_message
class StepReport(Message):
    """Training progress (``ctx.report`` or the Keras callback)."""

    TYPE = "step"
    step: int
    metrics: dict[str, float] = field(default_factory=dict)
    CHECKS = {"step": c.integer, "metrics": c.mapping(c.string, c.number)}


@_message
class FeedServing(Message):
    """A training node's data feed listens at ``host:port`` (InputMode.SPARK)."""

    TYPE = "feed_serving"
    host: str
    port: int
    CHECKS = {"host": c.string, "port": c.integer}


@_message
class FeedReport(Message):
    """A training node's data feed: rows received and consumed, bytes waiting, seconds the
    buffered data has waited, and whether the function called ``terminate()``."""

    TYPE = "feed_progress"
    received: int
    consumed: int
    buffered: int
    stalled: float = 0.0
    terminated: bool = False
    CHECKS = {"received": c.integer, "consumed": c.integer, "buffered": c.integer, "stalled": c.number,
              "terminated": c.boolean}


#: ``Files.area`` of a node's profiler traces: relpaths ``plugins/profile/<session>/<node>.xplane.pb``
#: under the run's TensorBoard root (the node's log files have area "", under the node's own directory).
PROFILE_AREA = "profile"


@_message
class Files(Message):
    """New bytes of files shipped by the node: ``(relpath, offset, data)`` under its own log
    directory (``area`` "") or its profiler traces (``area`` ``PROFILE_AREA``)."""

    TYPE = "files"
    chunks: tuple[tuple[str, int, bytes], ...]
    area: str = ""
    CHECKS = {"chunks": c.seq(c.fixed(c.string, c.offset, c.blob)), "area": c.string}


@_message
class PaceReport(Message):
    """How fast the node trains, measured in its process and sent about once a second.

    ``steps`` and ``examples`` count since the function started; over the last ``secs`` seconds it
    ran ``window_steps`` steps of ``step_secs`` each (the median; 0: unknown), took
    ``window_examples`` examples and waited ``wait_secs`` for the next batch from the feed
    (``input_measured``: only the feed of InputMode.SPARK can tell). ``epoch`` (from 0) of
    ``epochs`` and ``epoch_step`` of ``epoch_steps``, or ``step`` of ``total_steps``, say how far
    it is where Keras or ``ctx.report`` tells (0: unknown)."""

    TYPE = "pace"
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
    CHECKS = {"steps": c.offset, "secs": c.number, "window_steps": c.offset, "step_secs": c.number,
              "examples": c.offset, "window_examples": c.offset, "wait_secs": c.number,
              "input_measured": c.boolean, "step": c.integer, "total_steps": c.offset, "epoch": c.offset,
              "epochs": c.offset, "epoch_step": c.offset, "epoch_steps": c.offset}


@_message
class ProfileDone(Message):
    """The node captured a profiler trace for ``session`` (``ok``; its bytes were shipped before
    this message, in ``PROFILE_AREA``) or could not (``detail`` says why)."""

    TYPE = "profile_done"
    session: str
    ok: bool
    detail: str = ""
    CHECKS = {"session": c.string, "ok": c.boolean, "detail": c.string}


LEFTOVER_FIELDS: dict[str, Check] = {"host": c.string, "pid": c.integer, "run_id": c.string, "task": c.string,
                                     "cmdline": c.string, "gpus": c.seq(c.string), "used_mib": c.integer,
                                     "killed": c.boolean}


@_message
class Leftovers(Message):
    """Processes of earlier runs (and foreign GPU holders) on the node's host (``orphans.Leftover``
    fields)."""

    TYPE = "leftovers"
    items: tuple[dict, ...]
    CHECKS = {"items": c.seq(c.record(LEFTOVER_FIELDS))}


GPU_FIELDS: dict[str, Check] = {"address": c.string, "utilization": c.integer, "used_mib": c.integer,
                                "total_mib": c.integer}


@_message
class GpuReport(Message):
    """Utilisation (percent) and memory of the node's GPUs as NVML reads them, one map per GPU
    address Spark assigned (``GPU_FIELDS``)."""

    TYPE = "gpu_stats"
    gpus: tuple[dict, ...]
    CHECKS = {"gpus": c.seq(c.record(GPU_FIELDS))}


@_message
class SystemReport(Message):
    """The node's host as psutil reads it, as MLflow's system metrics do: CPU utilisation
    (percent), memory used (MB of 10^6 bytes) and its share (percent). Sent every few seconds
    while the run is logged to MLflow."""

    TYPE = "system_stats"
    cpu_percent: float
    memory_used_mb: float
    memory_percent: float
    CHECKS = {"cpu_percent": c.number, "memory_used_mb": c.number, "memory_percent": c.number}


@_message
class MlflowCalls(Message):
    """MLflow calls the chief's function made (``mlflow.log_metric``, ``mlflow.autolog()``...),
    relayed to the run's MLflow run on the driver: metric points ``(key, value, timestamp ms,
    step)``, params and tags ``(key, value)``."""

    TYPE = "mlflow"
    metrics: tuple[tuple[str, float, int, int], ...] = ()
    params: tuple[tuple[str, str], ...] = ()
    tags: tuple[tuple[str, str], ...] = ()
    CHECKS = {"metrics": c.seq(c.fixed(c.string, c.number, c.integer, c.integer)),
              "params": c.seq(c.fixed(c.string, c.string)), "tags": c.seq(c.fixed(c.string, c.string))}


@_message
class ModelExport(Message):
    """The chief exported the trained model (``ctx.export``) as a SavedModel at ``path``; ``keras``
    says what the model was (``tf_keras``, ``keras`` for Keras 3, or ``tf`` for another
    ``tf.Module``)."""

    TYPE = "model_export"
    path: str
    keras: str
    CHECKS = {"path": c.string, "keras": c.string}


@_message
class NodeQuery(Message):
    """From a Spark task that feeds the run (not a node): what became of node ``task``? It asks
    when that node's data feed is gone, to report the node's own failure instead."""

    TYPE = "node_query"
    task: int
    CHECKS = {"task": c.integer}


@_message
class Pong(Message):
    """The answer to a ``Ping``: the node's host is reachable."""

    TYPE = "pong"
    seq: int
    CHECKS = {"seq": c.integer}


@_message
class Result(Message):
    """The node's outcome: ``ok`` with the pickled return value (``value``, of type ``value_type``),
    ``stopped`` on request, or neither with the traceback; ``exit_code`` of its process."""

    TYPE = "result"
    ok: bool
    exit_code: int | None = None
    value: bytes | None = None
    value_type: str = ""
    stopped: bool = False
    traceback: str = ""
    CHECKS = {"ok": c.boolean, "exit_code": c.opt_integer, "value": c.opt_blob, "value_type": c.string,
              "stopped": c.boolean, "traceback": c.string}


# -- driver -> node ----------------------------------------------------------------------------

@_message
class Cluster(Message):
    """Every node registered: the cluster spec (``role -> ["host:port", ...]``)."""

    TYPE = "cluster"
    cluster_spec: dict[str, list[str]]
    model_dir_shared: bool = True  # every node sees the driver's model dir (``ctx.model_dir_shared``)
    CHECKS = {"cluster_spec": c.mapping(c.string, lambda v: list(c.seq(c.string)(v))), "model_dir_shared": c.boolean}


@_message
class NodeAnswer(Message):
    """The answer to a ``NodeQuery``: the node's state and, if it failed, why (one line or a few)."""

    TYPE = "node_answer"
    state: str
    failure: str = ""
    CHECKS = {"state": c.string, "failure": c.string}


@_message
class Ping(Message):
    """The driver's heartbeat: the node answers with a ``Pong``. A node that hears none for
    ``DRIVER_SILENT_SECS`` takes the driver for lost and ends its process."""

    TYPE = "ping"
    seq: int
    CHECKS = {"seq": c.integer}


@_message
class Stop(Message):
    """Stop the node's process (its process group)."""

    TYPE = "stop"


@_message
class Profile(Message):
    """Capture a TensorFlow profiler trace of the running function for ``seconds`` or, when
    ``steps`` > 0, for that many training steps; name it ``session`` (see ``ProfileDone``)."""

    TYPE = "profile"
    session: str
    seconds: float = 0.0
    steps: int = 0
    CHECKS = {"session": c.string, "seconds": c.number, "steps": c.offset}


@_message
class FilesResend(Message):
    """A mirror was attached: send every file again from the start."""

    TYPE = "files_resend"


@_message
class FilesRewind(Message):
    """The driver lacks the bytes before these offsets: send again from there."""

    TYPE = "files_rewind"
    files: dict[str, int]
    area: str = ""
    CHECKS = {"files": c.mapping(c.string, c.offset), "area": c.string}


# -- encoding ----------------------------------------------------------------------------------

def encode(msg: Message) -> dict:
    """The wire map of ``msg``."""
    out = {"type": msg.TYPE}
    out.update(asdict(msg))  # type: ignore[call-overload]
    return out


def decode(raw: Any) -> Message:
    """The message in the wire map ``raw``; raises ``ChannelError`` naming what is wrong."""
    if not isinstance(raw, dict):
        raise ChannelError(f"malformed message: expected a map, got {type(raw).__name__}")
    kind = raw.get("type")
    cls = _TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ChannelError(f"malformed message: unknown type {str(kind)[:40]!r}")
    values = {}
    for f in fields(cls):
        if f.name not in raw:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ChannelError(f"malformed {kind!r} message: no {f.name!r}")
            continue
        try:
            values[f.name] = cls.CHECKS[f.name](raw[f.name])
        except (TypeError, ValueError, KeyError) as e:
            raise ChannelError(f"malformed {kind!r} message: field {f.name!r}: {e}") from None
    return cls(**values)


def to_json(msg: Message) -> str:
    """One JSON line (the child's status pipe carries step and feed reports this way)."""
    return json.dumps(encode(msg))


def from_json(line: str | bytes) -> Message:
    """The message in one JSON line; ``ChannelError`` when it is not one."""
    try:
        raw = json.loads(line)
    except ValueError as e:
        raise ChannelError(f"malformed status line: {e}") from None
    return decode(raw)
