"""TensorBoard processes we manage: start (or reuse) one per log directory (on 127.0.0.1, or where
``urls.bind_host`` says the browser's proxy reaches it), keep an on-disk registry of them, stop them on request and when their owner exits.

Each TensorBoard is a subprocess in a process group of its own (``launcher.py``), never inside the
Jupyter server, so stopping it (or its owner dying) takes its data server with it. The registry is
one JSON file per process in ``registry_dir()``; an entry whose process is gone (or whose pid now
belongs to another process) is stale and removed when read.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import psutil

from ..errors import TFOSError
from ..runtime.host.ports import free_port
from ..runtime.host.procs import kill_group
from ..runtime.host.timeouts import Deadline
from ..state.files import same_process, state_dir, write_json_atomic
from .urls import ALL_INTERFACES, LOOPBACK, local_url

log = logging.getLogger(__name__)

HOST = LOOPBACK


class TensorBoardError(TFOSError):
    """A TensorBoard process could not be started."""


@dataclass(frozen=True)
class TensorBoardInfo:
    """One TensorBoard process in the registry."""

    pid: int
    port: int
    logdir: str
    owner_pid: int
    started: float
    create_time: float  # the process's start time as the OS reports it: tells a reused pid apart
    log_file: str
    host: str = HOST  # the address it listens on

    @property
    def local_url(self) -> str:
        return local_url(self.port)

    def alive(self) -> bool:
        return same_process(self.pid, self.create_time)


@dataclass(frozen=True)
class StartLaunched:
    """A new TensorBoard process was started for the log directory."""

    info: TensorBoardInfo


@dataclass(frozen=True)
class StartReused:
    """A TensorBoard already serving this log directory was found and reused."""

    info: TensorBoardInfo


def registry_dir() -> str:
    """Where the registry of TensorBoard processes lives."""
    return state_dir("tensorboard")


def running() -> list[TensorBoardInfo]:
    """The live TensorBoard processes in the registry; stale entries are removed."""
    found = []
    for name in sorted(os.listdir(registry_dir())):
        if not name.endswith(".json"):
            continue
        path = os.path.join(registry_dir(), name)
        try:
            with open(path) as f:
                info = TensorBoardInfo(**json.load(f))
        except (OSError, ValueError, TypeError) as e:  # removed meanwhile, or being replaced
            log.debug("skipping TensorBoard registry entry %s: %s", name, e)
            continue
        if info.alive():
            found.append(info)
        else:
            _remove_entry(info.pid)
    return found


def find(logdir: str) -> TensorBoardInfo | None:
    """The live TensorBoard serving ``logdir``, if any."""
    logdir = os.path.realpath(logdir)
    return next((info for info in running() if info.logdir == logdir), None)


def start(logdir: str, *, port: int | None = None, ports: Iterable[int] | None = None, host: str = HOST,
          reuse: bool = True, reload_interval: float = 1.0, with_tensorflow: bool = False, timeout: float = 60.0,
          extra_args: Iterable[str] = ()) -> StartLaunched | StartReused:
    """Start a TensorBoard on ``logdir`` listening on ``host``, or reuse the one already serving it
    there.

    Args:
        logdir: the local directory TensorBoard reads (a mirror).
        port: the port to use; ``ports``: candidates to choose a free one from (on Databricks
            6006-6106 but the notebook's comm channel); neither: any free port.
        host: the address to listen on: 127.0.0.1, or ``0.0.0.0`` behind a proxy that connects
            from beyond the loopback (``urls.bind_host``).
        reuse: return the TensorBoard already serving ``logdir`` on ``host`` instead of starting another.
        reload_interval: seconds between TensorBoard's reloads of the log directory.
        with_tensorflow: let TensorBoard import TensorFlow (slower, larger; only the profiler and
            projector need it).
        timeout: seconds to wait for it to answer HTTP.
        extra_args: more TensorBoard command-line flags.

    The process is stopped by ``stop``, and when this Python process exits (at exit, or by its
    watchdog if this process is killed).

    Raises:
        TensorBoardError: it exited or did not answer within ``timeout`` (the message holds the
            end of its log), or no candidate port was free.
    """
    logdir = os.path.realpath(logdir)
    if reuse and (existing := find(logdir)) is not None and existing.host == host:
        return StartReused(existing)
    os.makedirs(logdir, exist_ok=True)
    candidates = [port] if port is not None else list(ports) if ports is not None else None
    for _attempt in range(3):
        chosen = _pick_port(candidates, host)
        info = _launch(logdir, chosen, host, reload_interval, with_tensorflow, timeout, tuple(extra_args))
        if info is not None:
            return StartLaunched(info)
        # it exited because another process took the port in between: choose again
        if port is not None:
            break
    raise TensorBoardError(f"TensorBoard could not bind a port on {host} (tried {chosen} last): free a port "
                           "or pass another port=")


def stop(info: TensorBoardInfo, timeout: float = 10.0) -> bool:
    """Stop a TensorBoard process and its data server; returns False when it was already gone."""
    _remove_entry(info.pid)
    if not info.alive():
        return False
    try:
        procs = [psutil.Process(info.pid), *psutil.Process(info.pid).children(recursive=True)]
    except psutil.Error:
        return False

    def exited(seconds: float) -> bool:
        nonlocal procs
        _gone, procs = psutil.wait_procs(procs, timeout=seconds)
        return not procs

    if not kill_group(info.pid, timeout, exited):
        log.warning("TensorBoard pid %s: %d of its processes outlived SIGKILL", info.pid, len(procs))
    return True


def stop_owned() -> int:
    """Stop every TensorBoard this process started; returns how many (registered at exit)."""
    mine = [info for info in running() if info.owner_pid == os.getpid()]
    for info in mine:
        stop(info)
    return len(mine)


# -- internals -----------------------------------------------------------------------------------
atexit.register(stop_owned)  # stops only the TensorBoards of the process that is exiting


def _pick_port(candidates: list[int] | None, host: str) -> int:
    if candidates is None:
        return free_port(host)
    for p in candidates:
        if _port_free(p, host):
            return p
    raise TensorBoardError(f"no free port among {candidates[0]}..{candidates[-1]} on {host}: stop another "
                           "TensorBoard (tfos_notebook.tensorboard.process.running() lists ours)")


def _port_free(port: int, host: str) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _launch(logdir: str, port: int, host: str, reload_interval: float, with_tensorflow: bool, timeout: float,
            extra_args: tuple[str, ...]) -> TensorBoardInfo | None:
    log_file = os.path.join(registry_dir(), f"port-{port}.log")
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "tfos_notebook.tensorboard.launcher", str(os.getpid()),
           *([] if with_tensorflow else ["--no-tensorflow"]), "--",
           "--logdir", logdir, "--host", host, "--port", str(port), "--reload_interval", str(reload_interval),
           *extra_args]
    with open(log_file, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    info = TensorBoardInfo(pid=proc.pid, port=port, logdir=logdir, owner_pid=os.getpid(), started=time.time(),
                           create_time=psutil.Process(proc.pid).create_time(), log_file=log_file, host=host)
    _write_entry(info)
    deadline = Deadline(timeout)
    while not deadline.expired:
        if proc.poll() is not None:
            _remove_entry(info.pid)
            if not _port_free(port, host):
                return None
            raise TensorBoardError(f"TensorBoard exited with code {proc.returncode} while starting on {logdir}:\n"
                                   f"{_tail(log_file)}")
        if _answers(port, host):
            return info
        deadline.sleep(0.1)
    stop(info)
    raise TensorBoardError(f"TensorBoard did not answer on {info.local_url} within {timeout:.0f}s; raise "
                           f"timeout= on a loaded machine. Its log:\n{_tail(log_file)}")


def _answers(port: int, host: str) -> bool:
    address = LOOPBACK if host == ALL_INTERFACES else host
    try:
        with urllib.request.urlopen(f"http://{address}:{port}/data/runs", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _tail(path: str, limit: int = 3000) -> str:
    try:
        with open(path, "rb") as f:
            return f.read()[-limit:].decode("utf-8", "replace")
    except OSError:
        return "(no log)"


def _write_entry(info: TensorBoardInfo) -> None:
    write_json_atomic(os.path.join(registry_dir(), f"{info.pid}.json"), asdict(info))


def _remove_entry(pid: int) -> None:
    try:
        os.remove(os.path.join(registry_dir(), f"{pid}.json"))
    except FileNotFoundError:
        pass  # another process cleared it first
    except OSError as e:
        log.warning("could not remove TensorBoard pid %s from the registry: %s", pid, e)
