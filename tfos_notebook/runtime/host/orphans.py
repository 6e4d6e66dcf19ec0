"""Processes left behind by earlier runs, found and (on request) killed on one host: a node scans
its own before it starts, the cleanup (``driver/diagnosis/cleanup.py``) every host of the cluster.

Every node's processes carry ``TFOS_RUN_ID`` (and ``TFOS_TASK``, ``TFOS_ATTEMPT``) in their environment,
save a node's process forked from its Python worker (``node/task/forked.py``): the system shows the
worker's environment for it, so its node records it (``record_forked``: its pid, its start time
and its run, task and attempt, in the ``forked`` folder under ``pid_dir()``), and the scan reads
that where a process's environment says nothing (``run_marks``; a record whose pid is gone, or
was taken by another process since, counts for nothing and is removed). Every
node records its run under ``pid_dir()`` with its own pid before it starts its child (then adds the
child's pid), so that no scan sees a child of a live node unrecorded. A process marked with a run whose
nodes on this host are all gone is a leftover: it may still hold a GPU or a port and block the next
run. Processes holding a GPU that are not ours at all are reported too, as foreign holders.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import socket
from dataclasses import dataclass

import psutil

from .gpus import GpuProcess, gpu_processes
from .timeouts import Deadline

log = logging.getLogger(__name__)

PID_DIR_NAME = "tfos_notebook-pids"


def pid_dir() -> str:
    """Where nodes on this machine record the process groups they started."""
    import tempfile

    path = os.path.join(tempfile.gettempdir(), PID_DIR_NAME)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


@dataclass(frozen=True)
class Leftover:
    """A process on ``host``: ``run_id`` is the run that started it ("" for a foreign GPU holder)."""

    host: str
    pid: int
    run_id: str
    task: str
    cmdline: str
    gpus: tuple[str, ...] = ()
    used_mib: int = 0
    killed: bool = False

    @property
    def foreign(self) -> bool:
        return not self.run_id


def _live_runs() -> set[str]:
    """Runs with a live node on this host (their pid records name a running node process)."""
    live = set()
    for path in glob.glob(os.path.join(pid_dir(), "*.json")):
        try:
            with open(path) as f:
                record = json.load(f)
        except (OSError, ValueError) as e:  # removed, or being written, by its node meanwhile
            log.debug("pid record %s not read: %s", path, e)
            continue
        if psutil.pid_exists(int(record.get("node_pid", -1))):
            live.add(record["run_id"])
        else:
            try:
                os.remove(path)  # the node is gone; its record is stale
            except OSError as e:
                log.debug("could not remove the stale pid record %s: %s", path, e)
    return live


@dataclass(frozen=True)
class RunMarks:
    """Which node of which run started a process, and in which attempt (None: not known)."""

    run_id: str
    task: str
    attempt: int | None


def _forked_dir() -> str:
    path = os.path.join(pid_dir(), "forked")
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def record_forked(pid: int, marks: RunMarks) -> None:
    """Record the node's process ``pid``, forked from its Python worker, as ``marks``' (see the
    module's docstring); replaced whole, so that a scan never reads half of it."""
    path = os.path.join(_forked_dir(), f"{pid}.json")
    record = {"pid": pid, "created": psutil.Process(pid).create_time(), "run_id": marks.run_id,
              "task": marks.task, "attempt": marks.attempt}
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


def _forked_marks(proc: psutil.Process) -> RunMarks | None:
    """The marks recorded for ``proc`` by ``record_forked``, if it is the process recorded (its pid
    may have been reused since: the start times tell)."""
    path = os.path.join(_forked_dir(), f"{proc.pid}.json")
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    if abs(float(record.get("created", 0)) - proc.create_time()) > 0.05:  # another process since
        _remove(path)
        return None
    return RunMarks(record["run_id"], record.get("task", ""), record.get("attempt"))


def _prune_forked() -> None:
    """Remove the records of forked processes that are gone."""
    for path in glob.glob(os.path.join(_forked_dir(), "*.json")):
        try:
            pid = int(os.path.basename(path).split(".")[0])
        except ValueError:
            continue
        if not psutil.pid_exists(pid):
            _remove(path)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError as e:
        log.debug("could not remove %s: %s", path, e)


def run_marks(proc: psutil.Process) -> RunMarks | None:
    """The run marks of ``proc`` (None: not a process of any run): from its environment, or, for a
    node's process forked from its Python worker, from its node's record of it."""
    env = proc.environ()
    if env.get("TFOS_RUN_ID"):
        attempt = env.get("TFOS_ATTEMPT")
        return RunMarks(env["TFOS_RUN_ID"], env.get("TFOS_TASK", ""), int(attempt) if attempt else None)
    return _forked_marks(proc)


def _gone(proc: psutil.Process) -> bool:
    """Exited (a zombie waiting for its parent to reap it holds no GPU, port or memory)."""
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _kill(pid: int, grace: float = 3.0) -> bool:
    """SIGTERM, then SIGKILL after ``grace`` seconds; whether the process is gone."""
    try:
        proc = psutil.Process(pid)
        for send in (proc.terminate, proc.kill):
            send()
            if Deadline(grace).wait_until(lambda: _gone(proc)):
                return True
        return _gone(proc)
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False


def host_label(address: str = "") -> str:
    """This machine by name and address, ``worker-3 (10.0.0.7)``: machines may share a host name.
    ``address``: the one this machine reaches the driver on (default: what its name resolves to)."""
    name = socket.gethostname()
    if not address:
        try:
            address = socket.gethostbyname(name)
        except OSError:
            return name
    return f"{name} ({address})" if address != name else name


def address_towards(host: str) -> str:
    """The local address this machine uses to reach ``host`` (no packet is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))
            return s.getsockname()[0]
    except OSError as e:  # no route to host: leftovers are reported under the host name alone
        log.debug("no local address towards %s: %s", host, e)
        return ""


def scan_host(exclude_runs: frozenset[str] | set[str] = frozenset(), kill: bool = False,
              gpu_holders: list[GpuProcess] | None = None, address: str = "") -> list[Leftover]:
    """Leftovers of earlier runs on this machine, and foreign processes holding GPUs.

    Args:
        exclude_runs: runs that are active and must not be touched.
        kill: terminate the leftovers of our runs (never foreign processes).
        gpu_holders: GPU processes to attribute (default: ask NVML / nvidia-smi).
        address: this machine's address as the driver knows it (see ``host_label``).
    """
    host = host_label(address)
    live = _live_runs() | set(exclude_runs)
    holders = gpu_processes() if gpu_holders is None else gpu_holders
    by_pid: dict[int, list[GpuProcess]] = {}
    for g in holders or []:
        by_pid.setdefault(g.pid, []).append(g)
    found, ours = [], set()
    _prune_forked()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            marks = run_marks(proc)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, ValueError):
            continue
        if marks is None:
            continue
        ours.add(proc.pid)
        if marks.run_id in live:
            continue
        gpus = by_pid.get(proc.pid, [])
        killed = _kill(proc.pid) if kill else False
        found.append(Leftover(host, proc.pid, marks.run_id, marks.task, " ".join(proc.info["cmdline"] or [])[:300],
                              tuple(g.gpu for g in gpus), sum(g.used_mib for g in gpus), killed))
    for pid, gpus in by_pid.items():
        if pid in ours:
            continue
        try:
            cmd = " ".join(psutil.Process(pid).cmdline())[:300]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            cmd = "?"
        found.append(Leftover(host, pid, "", "", cmd, tuple(g.gpu for g in gpus), sum(g.used_mib for g in gpus)))
    return found


def kill_attempts_before(run_id: str, attempt: int) -> list[int]:
    """Kill this host's processes of run ``run_id`` from attempts before ``attempt`` (a relaunch
    starts only once they are gone); returns their pids."""
    killed = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            marks = run_marks(proc)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, ValueError):
            continue
        if marks is not None and marks.run_id == run_id and marks.attempt is not None and marks.attempt < attempt:
            _kill(proc.pid, grace=1.0)
            killed.append(proc.pid)
    return killed
