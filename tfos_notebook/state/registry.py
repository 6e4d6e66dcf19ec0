"""The runs registry: every run launched on this driver machine, shared by all its kernels.

One JSON file per run under ``registry_dir()`` (``<state dir>/runs``, readable by this user
only), replaced atomically on every change, so a reader never sees half a record and a kernel
that crashes leaves at worst a record that is one change old. A record whose owner process is
gone while the run had not ended reads as ``lost``. At most ``MAX_ENDED`` ended runs are kept.

Other kernels (``%tfos_runs``, ``%%tfos_evaluate``) and the Jupyter server extension read it; a
stop request from them is a file beside the record that the owning kernel's tracker
(``notebook/tracker.py``) picks up.

Imports nothing of the runtime or the notebook layer: the Jupyter server extension imports it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from ..errors import ConfigError
from .files import same_process, state_dir, write_json_atomic

log = logging.getLogger(__name__)

MAX_ENDED = 100
MAX_CURVE_POINTS = 60  # the loss curve a record keeps for the sidebar
TERMINAL_STATES = frozenset({"finished", "failed", "stopped"})  # a run in one of these has ended


@dataclass(frozen=True)
class RunRecord:
    """What the registry knows about one run.

    Attributes:
        run_id, name: the run's id and name. state: ``reserving``, ``running``, ``finished``,
            ``failed``, ``stopped`` (or on the way: ``relaunching``, ``stopping``, ``failing``), or
            ``lost`` (its kernel died before it ended).
        owner_pid, owner_create_time: the process that launched it (a reused pid is told apart by
            its start time). kernel_id: that process's Jupyter kernel id, if it is a kernel.
        host: the driver's host name. num_nodes, roles: the planned nodes (``chief:0``...).
        input_mode: ``tensorflow`` or ``spark``. model_dir, log_dir: as the nodes see them.
        model_dir_unshared: the nodes (``worker:1 on host (address)``) that do not see the driver's
            model dir, a path local to each host (empty: shared, or not known yet).
        mirror_dir: the local directory the run's TensorBoard reads (None without one).
        eval_dir: where evaluation summaries go so that TensorBoard shows them as run ``eval``.
        tensorboard_port, tensorboard_url: the run's TensorBoard (the URL goes through the proxy).
        started_at, ended_at: epoch seconds. error: the first line of why it failed.
        step, loss: the last progress a node reported.
        curve: ``(step, loss)`` points across the run so far, at most ``MAX_CURVE_POINTS``
            (thinned evenly as the run goes on). findings: how many diagnoses the run raised.
        kind: ``training``, or ``evaluation`` for a ``%%tfos_evaluate`` of the run ``parent``
            (its states: ``waiting``, ``evaluating``, then ``finished``, ``failed`` or
            ``stopped``); metrics: the latest metrics an evaluation returned, at ``step``.
        mlflow_run_id, mlflow_url, mlflow_tracking_uri: the run's MLflow run (its page, None for
            a store no UI serves) and tracking store, when it is logged to MLflow (an evaluation
            logs its metrics there); mlflow_error: why its MLflow logging failed, if it did.
        pace: how the run goes, from the nodes' step timing: ``steps_per_sec`` and
            ``examples_per_sec`` in total, and where the nodes say how far they are ``fraction``
            (0..1), ``eta`` (seconds), ``epoch`` (from 1) and ``epochs``; once ended, the totals
            (``steps``, ``examples``) and the average rates. Empty before any node timed a step.
        attempts: the run's relaunches and what led to them, a line each (``view.attempt_line``).
    """

    run_id: str
    name: str
    state: str
    owner_pid: int
    owner_create_time: float
    kernel_id: str | None = None
    host: str = ""
    num_nodes: int = 0
    roles: tuple[str, ...] = ()
    input_mode: str = "tensorflow"
    model_dir: str | None = None
    model_dir_unshared: tuple[str, ...] = ()
    log_dir: str | None = None
    mirror_dir: str | None = None
    eval_dir: str | None = None
    tensorboard_port: int | None = None
    tensorboard_url: str | None = None
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    error: str | None = None
    step: int | None = None
    loss: float | None = None
    curve: tuple[tuple[int, float], ...] = ()
    findings: int = 0
    kind: str = "training"
    parent: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    mlflow_run_id: str | None = None
    mlflow_url: str | None = None
    mlflow_tracking_uri: str | None = None
    mlflow_error: str | None = None
    pace: dict[str, float] = field(default_factory=dict)
    attempts: tuple[str, ...] = ()

    @property
    def ended(self) -> bool:
        return self.state in TERMINAL_STATES or self.state == "lost"

    def owner_alive(self) -> bool:
        return same_process(self.owner_pid, self.owner_create_time)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["roles"] = list(self.roles)
        out["model_dir_unshared"] = list(self.model_dir_unshared)
        out["curve"] = [list(p) for p in self.curve]
        out["attempts"] = list(self.attempts)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}  # a newer writer's extra fields
        data["roles"] = tuple(data.get("roles") or ())
        data["model_dir_unshared"] = tuple(data.get("model_dir_unshared") or ())
        data["attempts"] = tuple(data.get("attempts") or ())
        data["curve"] = tuple((int(step), float(loss)) for step, loss in data.get("curve") or ())
        return cls(**data)

    def with_point(self, step: int, loss: float) -> RunRecord:
        """This record with ``(step, loss)`` added to its curve (every other old point dropped
        when the curve is full, so it spans the whole run)."""
        curve = [*self.curve, (step, loss)]
        if len(curve) > MAX_CURVE_POINTS:
            curve = curve[:-1:2] + curve[-1:]
        return replace(self, curve=tuple(curve))


def registry_dir() -> str:
    """Where the records live: ``<state dir>/runs``, this user's only."""
    return state_dir("runs")


def list_runs() -> list[RunRecord]:
    """Every run in the registry, newest first; a run whose kernel died before it ended is ``lost``."""
    records = []
    for name in os.listdir(registry_dir()):
        if name.endswith(".json"):
            record = _read(name[:-5])
            if record is not None:
                records.append(record)
    return sorted(records, key=lambda r: r.started_at, reverse=True)


def get_run(which: str) -> RunRecord:
    """The newest run whose id or name is ``which``.

    Raises:
        ConfigError: no such run; the message lists the runs there are.
    """
    runs = list_runs()
    found = next((r for r in runs if which in (r.run_id, r.name)), None)
    if found is None:
        known = ", ".join(f"{r.name} ({r.state})" for r in runs[:10]) or "none yet"
        raise ConfigError(f"no run named {which!r} on this machine; runs: {known}. "
                          "%tfos_runs lists them, with the kernels that own them")
    return found


def write_record(record: RunRecord) -> None:
    """Enter ``record`` in the registry, replacing the run's previous record whole."""
    write_json_atomic(_record_path(record.run_id), record.to_json())


def request_stop(which: str) -> RunRecord:
    """Ask the kernel that owns run ``which`` to stop it; it does so within about a second.

    Raises:
        ConfigError: no such run, it already ended, or its kernel is gone.
    """
    record = get_run(which)
    if record.ended:
        raise ConfigError(f"run {record.name} already {record.state}: nothing to stop")
    write_json_atomic(_stop_path(record.run_id), {"requested_at": time.time(), "by_pid": os.getpid()})
    return record


def take_stop_request(run_id: str) -> bool:
    """Whether a stop of ``run_id`` was requested; the request is taken away (it is carried out once)."""
    return _remove(_stop_path(run_id))


def clear_ended() -> int:
    """Remove every ended (``finished``, ``failed``, ``stopped`` or ``lost``) run from the
    registry; returns how many went. Runs still going stay."""
    ended = [r for r in list_runs() if r.ended]
    for record in ended:
        _remove(_record_path(record.run_id))
        _remove(_stop_path(record.run_id))
    return len(ended)


def prune() -> None:
    """Keep the newest ``MAX_ENDED`` ended runs."""
    ended = [r for r in list_runs() if r.ended]
    for record in ended[MAX_ENDED:]:
        _remove(_record_path(record.run_id))
        _remove(_stop_path(record.run_id))


def _stop_path(run_id: str) -> str:
    return os.path.join(registry_dir(), f"{_safe(run_id)}.stop")


def _remove(path: str) -> bool:
    """Remove ``path``; whether it was there."""
    try:
        os.remove(path)
        return True
    except FileNotFoundError:
        return False
    except OSError as e:
        log.warning("could not remove %s from the runs registry: %s", path, e)
        return False


def _record_path(run_id: str) -> str:
    return os.path.join(registry_dir(), f"{_safe(run_id)}.json")


def _safe(run_id: str) -> str:
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise ConfigError(f"{run_id!r} is not a run id")
    return run_id


def _read(run_id: str) -> RunRecord | None:
    try:
        with open(_record_path(run_id)) as f:
            record = RunRecord.from_json(json.load(f))
    except FileNotFoundError:
        return None  # removed meanwhile
    except (OSError, ValueError, TypeError) as e:
        log.debug("skipping %s.json in the runs registry: not a record (%s)", run_id, e)
        return None
    if not record.ended and not record.owner_alive():
        return replace(record, state="lost")
    return record
