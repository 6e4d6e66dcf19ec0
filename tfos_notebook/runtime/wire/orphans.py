"""Processes left behind by earlier runs, found and (on request) killed on one host: a node scans
its own before it starts, the cleanup (``driver/cleanup.py``) every host of the cluster.

Every node's processes carry ``TFOS_RUN_ID`` (and ``TFOS_TASK``, ``TFOS_ATTEMPT``) in their environment,
save a node's process forked from its Python worker (``node/forked.py``): the system shows the
worker's environment for it, so its run, task and attempt are read from its command line
(``plan.CHILD_MODULE``), which it sets to what a spawned one has (``run_marks``). Every
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
from .plan import CHILD_MODULE
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


def run_marks(proc: psutil.Process) -> RunMarks | None:
    """The run marks of ``proc`` (None: not a process of any run): from its environment, or, for a
    node's process forked from its Python worker, from its command line (the one ``process_iter``
    read already, where it did)."""
    env = proc.environ()
    if env.get("TFOS_RUN_ID"):
        attempt = env.get("TFOS_ATTEMPT")
        return RunMarks(env["TFOS_RUN_ID"], env.get("TFOS_TASK", ""), int(attempt) if attempt else None)
    cmd = getattr(proc, "info", {}).get("cmdline") or proc.cmdline()
    if CHILD_MODULE not in cmd:
        return None
    args = cmd[cmd.index(CHILD_MODULE) + 1:]
    if len(args) < 8:  # not one of ours: our node's process has its name and attempt last
        return None
    return RunMarks(args[2], args[6], int(args[7]))


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
