"""The runs registry: every run launched on this driver machine, shared by all its kernels.

One JSON file per run under ``registry_dir()`` (``<state dir>/runs``, readable by this user
only), replaced atomically on every change, so a reader never sees half a record and a kernel
that crashes leaves at worst a record that is one change old. A record whose owner process is
gone while the run had not ended reads as ``lost``. At most ``MAX_ENDED`` ended runs are kept.

Other kernels (``%tfos_runs``, ``%%tfos_evaluate``) and the Jupyter server extension read it; a
stop request from them is a file beside the record that the owning kernel's tracker picks up.

Imports neither IPython nor ipywidgets: the Jupyter server extension imports this module.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import psutil

from ..runtime.errors import ConfigError
from ..runtime.events import TERMINAL_STATES, Event, RunFinished, Step
from ..runtime.statefiles import same_process, state_dir, write_json_atomic

if TYPE_CHECKING:
    from ..runtime.launch import Run
    from ..tensorboard import TensorBoardHandle

MAX_ENDED = 100
STOP_POLL_SECS = 0.5
STEP_WRITE_SECS = 1.0  # step/loss changes are written at most this often


@dataclass(frozen=True)
class RunRecord:
    """What the registry knows about one run.

    Attributes:
        run_id, name: the run's id and name. state: ``reserving``, ``running``, ``finished``,
            ``failed``, ``stopped``, or ``lost`` (its kernel died before it ended).
        owner_pid, owner_create_time: the process that launched it (a reused pid is told apart by
            its start time). kernel_id: that process's Jupyter kernel id, if it is a kernel.
        host: the driver's host name. num_nodes, roles: the planned nodes (``chief:0``...).
        input_mode: ``tensorflow`` or ``spark``. model_dir, log_dir: as the nodes see them.
        mirror_dir: the local directory the run's TensorBoard reads (None without one).
        eval_dir: where evaluation summaries go so that TensorBoard shows them as run ``eval``.
        tensorboard_port, tensorboard_url: the run's TensorBoard (the URL goes through the proxy).
        started_at, ended_at: epoch seconds. error: the first line of why it failed.
        step, loss: the last progress a node reported.
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

    @property
    def ended(self) -> bool:
        return self.state in TERMINAL_STATES or self.state == "lost"

    def owner_alive(self) -> bool:
        return same_process(self.owner_pid, self.owner_create_time)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["roles"] = list(self.roles)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}  # a newer writer's extra fields
        data["roles"] = tuple(data.get("roles") or ())
        return cls(**data)


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


def format_runs(records: list[RunRecord], now: float | None = None) -> str:
    """A table of ``records``, one line each: what ``%tfos_runs`` prints."""
    if not records:
        return "no runs on this machine yet"
    now = now or time.time()
    me = os.getpid()
    lines = [f"{'NAME':<20} {'RUN ID':<24} {'STATE':<10} {'AGE':>7} {'STEP':>7} {'LOSS':>9}  OWNER  TENSORBOARD"]
    for r in records:
        step = "" if r.step is None else str(r.step)
        loss = "" if r.loss is None else f"{r.loss:.4g}"
        owner = "here" if r.owner_pid == me else str(r.owner_pid)
        lines.append(f"{r.name:<20.20} {r.run_id:<24} {r.state:<10} {_age(now - r.started_at):>7} {step:>7} "
                     f"{loss:>9}  {owner:<6} {r.tensorboard_url or '-'}")
    return "\n".join(lines)


class RunTracker:
    """Keeps a run's record current from its events and carries out stop requests for it.

    Made by :func:`track`; ``stop()`` ends the tracking (it also ends with the run).
    """

    def __init__(self, run: Run, on_stop: Callable[[], None] | None = None) -> None:
        self.run = run
        self._on_stop = on_stop or run.stop
        self._lock = threading.Lock()
        self._last_step_write = 0.0
        self._done = threading.Event()
        self.record = RunRecord(
            run_id=run.run_id, name=run.name, state=run.state if run.state != "new" else "reserving",
            owner_pid=os.getpid(), owner_create_time=psutil.Process().create_time(), kernel_id=_kernel_id(),
            host=socket.gethostname(), num_nodes=len(run.roles), roles=tuple(f"{r}:{i}" for r, i in run.roles),
            input_mode=run.input_mode, model_dir=run.model_dir, log_dir=run.log_dir)
        self._write()
        _prune()
        self._unsubscribe = run.events.subscribe(self._on_event)
        self._watcher = threading.Thread(target=self._watch_stop_requests, daemon=True,
                                         name=f"tfos-registry-{run.run_id}")
        self._watcher.start()

    def set_tensorboard(self, board: TensorBoardHandle | None) -> None:
        """Record the run's TensorBoard (None: it stopped)."""
        if board is None:
            self._update(tensorboard_port=None, tensorboard_url=None)
        else:
            root = board.mirror.root
            self._update(mirror_dir=root, eval_dir=os.path.join(root, "eval"), tensorboard_port=board.port,
                         tensorboard_url=board.url)

    def stop(self) -> None:
        """Stop tracking (the record stays)."""
        self._done.set()
        self._unsubscribe()

    def _on_event(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            self._update(state=event.state, ended_at=event.t, error=(event.error.splitlines() or [None])[0])
            self.stop()
        elif isinstance(event, Step):
            changes: dict[str, Any] = {"step": event.step}
            if "loss" in event.metrics:
                changes["loss"] = float(event.metrics["loss"])
            self._update(throttle=True, **changes)
        elif self.run.state not in ("new", *TERMINAL_STATES):  # reserving or running, on any event
            self._update(state=self.run.state)

    def _update(self, throttle: bool = False, **changes: Any) -> None:
        with self._lock:
            record = replace(self.record, **changes)
            if record == self.record:
                return
            self.record = record
            now = time.monotonic()
            if throttle and now - self._last_step_write < STEP_WRITE_SECS:
                return  # written with the next change (the run's end always writes)
            self._last_step_write = now
            self._write()

    def _write(self) -> None:
        write_json_atomic(_record_path(self.record.run_id), self.record.to_json())

    def _watch_stop_requests(self) -> None:
        path = _stop_path(self.run.run_id)
        while not self._done.wait(STOP_POLL_SECS):
            if os.path.exists(path):
                _remove(path)
                try:
                    self._on_stop()
                except Exception as e:  # the record says why; the kernel goes on
                    self._update(error=f"stop request failed: {e}")
        _remove(path)


def track(run: Run, on_stop: Callable[[], None] | None = None) -> RunTracker:
    """Enter ``run`` in the registry and keep its record current until it ends.

    Args:
        run: a ``tfos_notebook.Run`` (started or not).
        on_stop: what a stop request from another process calls (default ``run.stop``).
    """
    return RunTracker(run, on_stop)


# -- files ------------------------------------------------------------------------------------------
def _record_path(run_id: str) -> str:
    return os.path.join(registry_dir(), f"{_safe(run_id)}.json")


def _stop_path(run_id: str) -> str:
    return os.path.join(registry_dir(), f"{_safe(run_id)}.stop")


def _safe(run_id: str) -> str:
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise ConfigError(f"{run_id!r} is not a run id")
    return run_id


def _read(run_id: str) -> RunRecord | None:
    try:
        with open(_record_path(run_id)) as f:
            record = RunRecord.from_json(json.load(f))
    except (OSError, ValueError, TypeError):
        return None  # removed meanwhile, or not a record
    if not record.ended and not record.owner_alive():
        return replace(record, state="lost")
    return record


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _prune() -> None:
    """Keep the newest ``MAX_ENDED`` ended runs."""
    ended = [r for r in list_runs() if r.ended]
    for record in ended[MAX_ENDED:]:
        _remove(_record_path(record.run_id))
        _remove(_stop_path(record.run_id))


def _kernel_id() -> str | None:
    """This process's Jupyter kernel id, from its connection file (``kernel-<id>.json``)."""
    kernelapp = sys.modules.get("ipykernel.kernelapp")
    app = kernelapp.IPKernelApp.instance() if kernelapp and kernelapp.IPKernelApp.initialized() else None
    name = os.path.basename(getattr(app, "connection_file", "") or "")
    return name[len("kernel-"):-len(".json")] if name.startswith("kernel-") and name.endswith(".json") else None


def _age(secs: float) -> str:
    secs = max(0, int(secs))
    if secs < 3600:
        return f"{secs // 60}m{secs % 60:02d}s"
    if secs < 86400:
        return f"{secs // 3600}h{secs % 3600 // 60:02d}m"
    return f"{secs // 86400}d"
