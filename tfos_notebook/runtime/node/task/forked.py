"""The node's process started as a fork of its barrier task's Python worker, where that is safe.

A fresh interpreter costs a node's start about 0.08 s on a quiet machine and 0.14-0.16 s on a busy
one: the interpreter's own start, then the child's modules, most of which the task has imported
already. A fork has them at once. A fork copies one thread, the caller's: any other thread's locks
stay taken in the child, and a library whose state lives in such a thread (or in a device context)
breaks there. ``fork_refusal`` therefore forks only where it can account for every thread, reading
what the system says rather than what Python knows:
- every OS thread of the worker (``/proc/self/task``, native threads included: a faulthandler
  watchdog, which PySpark starts when ``PYTHON_TRACEBACK_DUMP_INTERVAL_SECONDS`` is set, an Arrow
  or OpenMP pool, a Python thread) but the caller must belong to a library known to survive a
  fork, counted exactly: numpy's OpenBLAS pool (``openblas_get_num_threads`` of the OpenBLAS mapped
  in, minus one) and jemalloc's background thread of pyarrow (its thread's name), both of which
  stop their threads before a fork and start them again after it (``pthread_atfork``);
- no native library that does not survive a fork is mapped in (``/proc/self/maps``: CUDA and its
  libraries, TensorFlow, PyTorch, XLA/JAX, gRPC's core, NCCL; a reused Python worker may have run a
  user's task that loaded one), whatever Python module loaded it;
- not ``TFOS_NODE_START=spawn`` (in the executors' environment or ``Run(env=...)``).
Else the node spawns a fresh interpreter, and its registration says why.

The forked child becomes what a spawned one is: a session of its own; stdin, stdout and stderr on
the node's pipes, unbuffered; none of the worker's other descriptors (each is pointed at
/dev/null rather than closed, so that an object of the worker's closing its descriptor later
closes nothing of the child's); the node's environment, import path and working directory; the
signal handlers and mask a fresh interpreter starts with; none of the worker's exit handlers;
numpy's global random state reseeded (the worker's would be the same for every node forked from
it). It runs the function it is given (``child.main``) and leaves with ``os._exit`` once its own
threads and exit handlers are done, never returning into the worker's stack.

The system shows a forked process the environment its executable started with, which is the
worker's and carries no run marks: the node records the process as its run's (``orphans.
record_forked``: its pid and start time, in the host's pid folder) for the leftover scan, which
needs no write into the process's own memory.
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
#: Native libraries that leave a process unsafe to fork once mapped in: their threads or device
#: state cannot be carried into a child (substrings of the mapped files' names).
FORK_UNSAFE_LIBRARIES = ("libcuda.so", "libcudart", "libcublas", "libcudnn", "libnccl", "libnvrtc",
                         "_pywrap_tensorflow", "libtensorflow_framework", "libtensorflow_cc", "libtorch",
                         "libc10", "xla_extension", "jaxlib", "cygrpc", "libmxnet", "libpaddle")
#: The names under which OpenBLAS builds export how many threads their pool runs.
OPENBLAS_THREADS = ("openblas_get_num_threads", "openblas_get_num_threads64_",
                    "scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads")
JEMALLOC_THREAD = "jemalloc_bg_thd"
WATCHDOG_ENV = "PYTHON_TRACEBACK_DUMP_INTERVAL_SECONDS"  # PySpark's faulthandler watchdog


def fork_refusal(env: dict[str, str]) -> str | None:
    """Why this process must not fork the node's process (None: it may); ``env`` is the node's
    environment. See the module's docstring."""
    if env.get(START_ENV, os.environ.get(START_ENV, "")) == "spawn":
        return f"{START_ENV}=spawn"
    mapped = mapped_files()
    if mapped is None:
        return "this system does not show a process's mapped libraries (/proc/self/maps)"
    unsafe = next((path for path in sorted(mapped) if any(lib in os.path.basename(path)
                                                           for lib in FORK_UNSAFE_LIBRARIES)), None)
    if unsafe:
        return f"this Python worker has loaded {os.path.basename(unsafe)}, which does not survive a fork"
    threads = os_threads()
    if threads is None:
        return "this system does not list a process's threads (/proc/self/task)"
    jemalloc = sum(1 for name in threads.values() if name == JEMALLOC_THREAD)
    openblas = openblas_pool(mapped)
    unexplained = len(threads) - 1 - jemalloc - openblas
    if unexplained > 0:
        watchdog = os.environ.get(WATCHDOG_ENV, "")
        why = (f", the faulthandler watchdog that PySpark starts for {WATCHDOG_ENV}={watchdog} among them"
               if watchdog.strip().isdigit() and int(watchdog) > 0 else "")
        return (f"this Python worker runs {len(threads)} OS threads, {unexplained} of them not of a library known to "
                f"survive a fork{why}")
    return None


def mapped_files(maps: str = "/proc/self/maps") -> set[str] | None:
    """The files mapped into this process (its libraries), or None where the system does not say."""
    try:
        with open(maps, encoding="utf-8", errors="surrogateescape") as f:
            return {line.split(None, 5)[5].strip() for line in f if line.count(" ") >= 5 and "/" in line}
    except OSError:
        return None


def os_threads(tasks: str = "/proc/self/task") -> dict[int, str] | None:
    """This process's OS threads, id -> name, or None where the system does not list them."""
    try:
        ids = [int(t) for t in os.listdir(tasks)]
    except OSError:
        return None
    names = {}
    for tid in ids:
        try:
            with open(f"{tasks}/{tid}/comm") as f:
                names[tid] = f.read().strip()
        except OSError:  # ended meanwhile
            continue
    return names


def openblas_pool(mapped: set[str]) -> int:
    """The threads of the OpenBLAS pool this process runs (its size less the calling thread), from
    the OpenBLAS it has mapped in; 0 where none is, or it does not say."""
    for path in sorted(p for p in mapped if "openblas" in os.path.basename(p) and ".so" in p):
        try:
            lib = ctypes.CDLL(path)  # already loaded: the same library, not a second copy
        except OSError:
            continue
        for name in OPENBLAS_THREADS:
            count = getattr(lib, name, None)
            if count is not None:
                count.restype = ctypes.c_int
                return max(0, count() - 1)
    return 0


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
        ctypes.CDLL(None).clearenv()  # libc's own copy too, which the processes this one starts inherit
        os.environ.update(env)
        sys.path[:] = path
        sys.argv[:] = argv
        _fresh_signals()
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


def _fresh_signals() -> None:
    """The signal handlers and mask a fresh interpreter starts with: every signal's default action
    but SIGPIPE's and SIGXFSZ's (ignored) and SIGINT's (``KeyboardInterrupt``), nothing blocked."""
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, signal.SIG_IGN if sig in (signal.SIGPIPE, signal.SIGXFSZ) else signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):  # one the system reserves (its threads library's)
            continue
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


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
