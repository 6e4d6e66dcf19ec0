"""The node's process started as a fork of its barrier task's Python worker, where that is safe.

A fresh interpreter costs a node's start about 0.08 s on a quiet machine and 0.14-0.16 s on a busy
one: the interpreter's own start, then the child's modules, most of which the task has imported
already. A fork has them at once. ``fork_refusal`` says when the node spawns a fresh interpreter
instead:
- the worker runs other threads, or has imported a library that does not survive a fork once
  loaded (CUDA through TensorFlow, PyTorch, JAX, CuPy; a reused Python worker may have run a
  user's task that imported one);
- the system cannot show the forked process's command line (below);
- ``TFOS_NODE_START=spawn``, in the executors' environment or ``Run(env=...)``.

The forked child becomes what a spawned one is: a session of its own; stdin, stdout and stderr on
the node's pipes, unbuffered; none of the worker's other descriptors (each is pointed at
/dev/null rather than closed, so that an object of the worker's closing its descriptor later
closes nothing of the child's); the node's environment, import path and working directory;
default signal handlers; none of the worker's exit handlers; numpy's global random state reseeded
(the worker's would be the same for every node forked from it). It runs the function it is given
(``child.main``) and leaves with ``os._exit`` once its own threads and exit handlers are done,
never returning into the worker's stack.

Its command line is the spawned one's (``python -m tfos_notebook.runtime.node.child ...``): the
leftover scan finds a node's process by it (``orphans.run_marks``), since the system shows a
forked process the environment its executable started with, which is the worker's. It is written
where the system reads a process's command line from, the start of its own memory that held the
worker's arguments and environment (as ``setproctitle(3)`` does; the library of that name finds
that memory from ``environ``, which the worker has moved, so the addresses are read from
``/proc/self/stat``), after every environment variable has been copied elsewhere.
"""

from __future__ import annotations

import atexit
import ctypes
import io
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable

#: ``spawn``: every node's process is a fresh interpreter (``fork``, the default: forked where safe).
START_ENV = "TFOS_NODE_START"
#: Modules that leave a process unsafe to fork once loaded (threads and device state a child
#: cannot inherit).
FORK_UNSAFE = ("tensorflow", "torch", "jax", "jaxlib", "cupy", "numba.cuda", "pycuda", "tensorrt", "mxnet",
               "paddle", "grpc")


def fork_refusal(env: dict[str, str], command: list[str]) -> str | None:
    """Why this process must not fork the node's process (None: it may); ``env`` is the node's
    environment, ``command`` its command line."""
    if env.get(START_ENV, os.environ.get(START_ENV, "")) == "spawn":
        return f"{START_ENV}=spawn"
    if threading.active_count() > 1:
        return f"this Python worker runs {threading.active_count()} threads"
    loaded = next((name for name in FORK_UNSAFE if name in sys.modules), None)
    if loaded:
        return f"this Python worker has imported {loaded}"
    area = command_area()
    if area is None or area[2] - area[0] <= len(" ".join(command).encode()):
        return "this system cannot show a forked process's command line"
    return None


def command_area() -> tuple[int, int, int] | None:
    """Where this process's command line and environment are in its memory, as the system reads
    them (``arg_start``, ``arg_end`` = ``env_start``, ``env_end`` of ``/proc/self/stat``); None
    where not known, or not one piece."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # after the name, field 3 on
        arg_start, arg_end, env_start, env_end = (int(x) for x in fields[45:49])  # fields 48-51
    except (OSError, ValueError, IndexError):
        return None
    if not arg_start or env_start != arg_end or env_end <= env_start:
        return None
    return arg_start, arg_end, env_end


class ForkedChild:
    """A forked node process as the node uses a ``subprocess.Popen``: ``pid``, its pipes
    (``stdin``, ``stdout``, ``stderr``), ``poll``, ``wait`` and ``returncode``."""

    def __init__(self, pid: int, stdin: int, stdout: int, stderr: int) -> None:
        self.pid = pid
        self.stdin = os.fdopen(stdin, "wb")
        self.stdout = os.fdopen(stdout, "rb")
        self.stderr = os.fdopen(stderr, "rb")
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        with self._lock:
            if self.returncode is None:
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:  # reaped elsewhere: its code is lost
                    self.returncode = -signal.SIGKILL
                    return self.returncode
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code (negative: the signal that ended it); ``subprocess.TimeoutExpired`` after
        ``timeout`` seconds."""
        end = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(delay if end is None else min(delay, max(0.0, end - time.monotonic())))
            delay = min(delay * 2, 0.05)
        return self.returncode


def fork_child(main: Callable[[list[str]], int], command: list[str], env: dict[str, str], cwd: str,
               pass_fds: tuple[int, ...], path: list[str]) -> ForkedChild:
    """Fork this process (``fork_refusal`` said it may) into the node's process: ``main(argv)``,
    the module's function that ``command`` (``python -m MODULE ARGS``) would run, with ``command``
    as its command line, ``env``, in ``cwd``, keeping ``pass_fds``, importing from ``path``."""
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    for stream in (sys.stdout, sys.stderr):  # what the worker buffered is not written twice
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    try:
        pid = os.fork()
    except OSError:  # no memory for the copy, or too many processes: the caller spawns instead
        for fd in (stdin_r, stdin_w, stdout_r, stdout_w, stderr_r, stderr_w):
            os.close(fd)
        raise
    if pid == 0:  # the child: never returns
        _run_child(main, command, env, cwd, (stdin_r, stdout_w, stderr_w), pass_fds, path)
    for fd in (stdin_r, stdout_w, stderr_w):
        os.close(fd)
    return ForkedChild(pid, stdin_w, stdout_r, stderr_r)


def _run_child(main: Callable[[list[str]], int], command: list[str], env: dict[str, str], cwd: str,
               stdio: tuple[int, int, int], pass_fds: tuple[int, ...], path: list[str]) -> None:
    code = 1
    argv = command[2:]  # as ``python -m`` gives them: the module, then its arguments
    try:
        os.setsid()
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
        _blank_descriptors({0, 1, 2, *pass_fds})
        os.chdir(cwd)
        os.environ.clear()
        ctypes.CDLL(None).clearenv()  # and what the worker's C code set: none is left in the command's memory
        os.environ.update(env)
        _show_command(" ".join(command).encode())
        sys.path[:] = path
        sys.argv[:] = argv
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = sys.__stdout__ = _unbuffered(1, "strict")
        sys.stderr = sys.__stderr__ = _unbuffered(2, "backslashreplace")
        atexit._clear()  # the worker's: its own exit is not this process's
        if "logging" in sys.modules:  # an interpreter's exit flushes and closes the log handlers
            atexit.register(sys.modules["logging"].shutdown)
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            # as an interpreter's exit: its threads' end (their own exit hooks first, which tell a
            # thread pool's threads to end), then its exit handlers
            threading._shutdown()
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _show_command(title: bytes) -> None:
    """Write ``title`` (spaces between its words) where the system reads this process's command
    line: from the start of its arguments' memory, over its environment's, padded with spaces up
    to the end of the arguments' memory so that the system reads it as one string, not as the
    arguments that memory held, then zeros (``fork_refusal`` made sure it fits)."""
    start, arg_end, end = command_area()
    data = title.ljust(arg_end - start, b" ") + b"\0"
    ctypes.memmove(start, data + b"\0" * (end - start - len(data)), end - start)


def _unbuffered(fd: int, errors: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8", errors=errors,
                            line_buffering=True, write_through=True)


def _blank_descriptors(keep: set[int]) -> None:
    """Point every open descriptor but ``keep`` at /dev/null: the worker's sockets and files are no
    longer held, and their numbers stay taken until whatever owns them closes them."""
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in sorted(int(name) for name in os.listdir("/proc/self/fd")):
            if fd in keep or fd == null:
                continue
            try:
                os.fstat(fd)  # open (not the listing's own, closed since)
            except OSError:
                continue
            os.dup2(null, fd)
    finally:
        os.close(null)
