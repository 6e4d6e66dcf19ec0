"""The node's child process seen from its barrier task: how it is started (environment, the
pre-spawn), and the threads that carry its output lines and status reports to the driver.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...host.orphans import RunMarks, record_forked
from ...host.timeouts import Deadline
from ...host.versions import LEGACY_KERAS_ENV, uses_legacy_keras
from ...wire import channel
from ...wire import messages as m
from ...wire.errors import ChannelError
from ...wire.plan import CHILD_MODULE, FEED_SERVER_MODULE, PREIMPORT_ENV, chief_of, node_name
from ..child.mlflowrelay import relay_env
from .forked import ForkedChild, fork_child, fork_refusal

if TYPE_CHECKING:
    from ...wire.plan import NodePlan
    from .feed.localfeed import LocalFeed
    from .logship import LogShipper

log = logging.getLogger(__name__)

LOG_FLUSH_SECONDS = 0.2


class Forwarder:
    """Batches output lines and progress messages from the child to the driver."""

    def __init__(self, conn: channel.Connection) -> None:
        self.conn = conn
        self.q: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True, name="tfos-forward")
        self.thread.start()

    def put(self, item: tuple) -> None:
        self.q.put(item)

    def _run(self) -> None:
        done = False
        while not done:
            lines, reports = [], []
            window = Deadline(LOG_FLUSH_SECONDS)
            while not window.expired and len(lines) < 500:
                try:
                    item = self.q.get(timeout=window.remaining())
                except queue.Empty:
                    break
                if item is None:
                    done = True
                    break
                if isinstance(item, m.Message):
                    reports.append(item)
                else:
                    lines.append(item)
            try:
                if lines:
                    self.conn.send(m.encode(m.Logs(tuple(lines))))
                for report in reports:
                    self.conn.send(m.encode(report))
            except OSError as e:  # the driver is gone: the node ends its process (see node.watch_driver)
                log.warning("the driver's connection closed: the node's output is no longer forwarded (%s)", e)
                return

    def close(self) -> None:
        self.q.put(None)
        self.thread.join(timeout=5)


def pump_lines(stream, name: str, fwd: Forwarder) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip("\n")
        fwd.put((name, line))
    stream.close()


STATUS_MESSAGES = (m.StepReport, m.FeedServing, m.FeedReport, m.PaceReport, m.ProfileDone, m.MlflowCalls, m.ModelExport,
                   m.AtBoundary, m.SaveAtSeen, m.Saved)


def pump_status(stream, fwd: Forwarder, local_feed: LocalFeed | None, drain: Callable[[str], None]) -> None:
    """Forward the child's status lines (progress, step timing, feed reports, profiles, relayed
    MLflow calls, the exported model) as typed messages; a profile's trace is shipped (``drain``
    of its area) before the message that says it is there."""
    for raw in iter(stream.readline, b""):
        try:
            msg = m.from_json(raw)
        except ChannelError as e:
            log.warning("a status line from the node's process was refused: %s", e)
            continue
        if isinstance(msg, STATUS_MESSAGES):
            if isinstance(msg, m.FeedServing) and local_feed is not None:
                local_feed.serving(msg.host, msg.port)
            if isinstance(msg, m.ProfileDone):
                drain(m.PROFILE_AREA)
            fwd.put(msg)
        else:
            log.warning("the node's process sent %r on its status pipe; ignored", msg.TYPE)
    stream.close()


class ChildOutput:
    """The child's stdout and stderr lines and status reports, carried to the driver through a
    :class:`Forwarder` from the node's registration on (the data feed may be reported before the
    cluster is formed); a status report that the node's data feed listens also reaches
    ``local_feed``. Once the function runs, ``shipper`` ships the node's files (a profile's trace
    before the report that it is done). :meth:`close` waits for the pumps (bounded) and flushes
    what they read."""

    def __init__(self, proc: subprocess.Popen, status_r: int, conn: channel.Connection,
                 local_feed: LocalFeed | None) -> None:
        self.fwd = Forwarder(conn)
        self.shipper: LogShipper | None = None
        self.pumps = [threading.Thread(target=pump_lines, args=(proc.stdout, "stdout", self.fwd), daemon=True),
                      threading.Thread(target=pump_lines, args=(proc.stderr, "stderr", self.fwd), daemon=True),
                      threading.Thread(target=pump_status, args=(os.fdopen(status_r, "rb"), self.fwd, local_feed, self._drain),
                                       daemon=True)]
        for t in self.pumps:
            t.start()

    def _drain(self, area: str) -> None:
        if self.shipper is not None:
            self.shipper.drain(area)

    def close(self, timeout: float = 5.0) -> None:
        for t in self.pumps:
            t.join(timeout=timeout)
        self.fwd.close()


def serve_feed(proc: subprocess.Popen, secret: channel.Secret, host: str, buffer_bytes: int) -> None:
    """Have the child serve the node's data feed at once, before it is told to go: data can then
    flow into its buffer while the cluster forms and the user's function starts."""
    order = {"feed": {"secret": channel.secret_to_json(secret), "host": host, "buffer_bytes": buffer_bytes}}
    proc.stdin.write((json.dumps(order) + "\n").encode())
    proc.stdin.flush()


def _child_env(plan: NodePlan, task: int, devices: list[str]) -> dict:
    env = dict(os.environ)
    env.update(plan.env)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
    env["TFOS_RUN_ID"] = plan.run_id  # marks the node's processes (and their children) as this run's
    env["TFOS_TASK"] = node_name(*plan.roles[task])
    env["TFOS_ATTEMPT"] = str(plan.attempt)
    env["PYTHONUNBUFFERED"] = "1"
    env[LEGACY_KERAS_ENV] = "1" if uses_legacy_keras(plan.legacy_keras, plan.env, os.environ) else "0"
    if plan.preimport:  # Run(env={PREIMPORT_ENV: ""}) turns it off
        first = (FEED_SERVER_MODULE,) if plan.serves_feed(task) else ()
        env.setdefault(PREIMPORT_ENV, ",".join(first + tuple(plan.preimport)))
    if plan.mlflow:
        relay_env(env, plan.run_id, chief=plan.roles[task] == chief_of(plan.roles))
    # The child must import this package the same way the Python worker did, but not pyspark
    # from Spark's pyspark.zip when an installed copy exists: zipimport compiles every module from
    # source on each start, which costs about a second per node.
    here = os.path.abspath(__file__)
    for _ in __name__.split("."):  # up to the folder that holds the package
        here = os.path.dirname(here)
    paths = [here, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    if _installed_pyspark(paths):
        paths = [p for p in paths if not _is_spark_zip(p)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _is_spark_zip(path: str) -> bool:
    name = os.path.basename(path)
    return name.endswith(".zip") and (name.startswith("pyspark") or name.startswith("py4j"))


def _installed_pyspark(pythonpath: list[str]) -> bool:
    """Whether pyspark and py4j can be imported from plain folders (site-packages or PYTHONPATH)."""
    from importlib.machinery import PathFinder

    folders = [p for p in (*pythonpath, *sys.path) if p and not p.endswith(".zip")]
    return all(PathFinder.find_spec(name, folders) is not None for name in ("pyspark", "py4j"))


class ChildOrders:
    """The node's pipe to its child's orders (``child/orders.follow_orders`` reads them)."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "w", buffering=1)
        self._lock = threading.Lock()

    def send(self, order: dict) -> bool:
        """Write one order; False when the child is gone."""
        import json

        with self._lock:
            try:
                self._file.write(json.dumps(order) + "\n")
                return True
            except (OSError, ValueError):  # the child ended (or the pipe was closed)
                return False

    def close(self) -> None:
        with self._lock:
            try:
                self._file.close()
            except OSError as e:  # the child ended with an order unread
                log.debug("profile orders pipe: %s", e)


@dataclass
class StartedChild:
    """The node's child process as ``start_child`` started it: the process, the read end of its
    status pipe, (with ``release_port=False``) the node's end of the Unix socket that hands it the
    reserved port, the pipe that carries orders to it, and how it started (``fork``, or
    ``spawn: `` and why it was not forked)."""

    proc: subprocess.Popen | ForkedChild
    status_r: int
    handoff: socket.socket | None
    orders: ChildOrders
    how: str


def start_child(plan: NodePlan, task: int, devices: list[str], workdir: str,
                shared: tuple[str, ...] = ()) -> StartedChild:
    """Start the node's child process, seeing the GPUs ``devices`` (``CUDA_VISIBLE_DEVICES``
    entries): forked from this worker where that is safe (``forked.py``), else a fresh
    interpreter. ``shared``: modules both this task and the process import (a fed node's feed):
    imported before a fork, which the process then inherits them from, and left to the task after
    a spawn, whose process imports its own meanwhile."""
    status_r, status_w = os.pipe()
    orders_r, orders_w = os.pipe()
    handoff = child_end = None
    pass_fds = [status_w, orders_r]
    if not plan.release_port:
        handoff, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pass_fds.append(child_end.fileno())
    command = [sys.executable, "-m", CHILD_MODULE, str(status_w), str(os.getpid()), plan.run_id, str(task),
               str(child_end.fileno()) if child_end is not None else "-", str(orders_r),
               node_name(*plan.roles[task]), str(plan.attempt)]
    env = _child_env(plan, task, devices)
    refusal = fork_refusal(env)
    proc = None
    if refusal is None:
        for name in shared:
            importlib.import_module(name)
        from ..child.main import main  # before the fork: this worker's, for every node it starts

        refusal = fork_refusal(env)  # again: what those imports started or loaded counts too
    if refusal is None:
        try:
            proc = fork_child(main, command, env, workdir, tuple(pass_fds), _child_path(env))
        except OSError as e:
            refusal = f"fork failed: {e}"
        else:
            record_forked(proc.pid, RunMarks(plan.run_id, node_name(*plan.roles[task]), plan.attempt))
    if proc is None:
        proc = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, pass_fds=tuple(pass_fds), start_new_session=True, cwd=workdir)
    os.close(status_w)
    os.close(orders_r)
    if child_end is not None:
        child_end.close()
    return StartedChild(proc, status_r, handoff, ChildOrders(orders_w), "fork" if refusal is None else f"spawn: {refusal}")


def _child_path(env: dict[str, str]) -> list[str]:
    """A forked child's import path: what a fresh interpreter in ``env`` would put first (its
    ``PYTHONPATH``), then this worker's, less Spark's zips where ``env``'s path leaves them out."""
    first = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    drop_zips = not any(_is_spark_zip(p) for p in first)
    return first + [p for p in sys.path if p not in first and not (drop_zips and _is_spark_zip(p))]


def hand_over_port(handoff: socket.socket, reservation: socket.socket) -> None:
    """Give the child the socket that holds the node's reserved port (``ctx.tmp_socket``), for
    ``release_port=False``: from then on only the child holds it, so ``ctx.release_port()`` there
    frees the port."""
    with handoff:
        socket.send_fds(handoff, [b"p"], [reservation.fileno()])
