"""A live TensorBoard for a run (or any log directory) on the driver: mirror + process + URL."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from typing import Any

from ..runtime.driver.events import RunFinished, TensorBoardStarted
from ..runtime.driver.spark import SparkBackend, backend_for
from ..runtime.driver.spark.databricks import DatabricksContext, read_context
from ..runtime.host.paths import is_shared_logdir
from . import process
from .mirror import Mirror
from .sources import open_source
from .sync import MirrorSync
from .urls import bind_host, port_candidates, tensorboard_url

log = logging.getLogger(__name__)

KEEP_AFTER_RUN_SECS = 900.0


class TensorBoardHandle:
    """A TensorBoard serving a mirror directory, and the loop feeding that mirror.

    Attributes:
        url: where a browser opens it (see ``urls.tensorboard_url``); port, pid: its process;
        mirror: the ``Mirror`` it reads (``mirror.root`` is TensorBoard's logdir); reused: True when
        an already running TensorBoard on the same mirror was reused.
    """

    def __init__(self, mirror: Mirror, sync: MirrorSync, outcome, spark: SparkBackend | None = None) -> None:
        self.mirror = mirror
        self.sync = sync
        self.info: process.TensorBoardInfo = outcome.info
        self.reused = isinstance(outcome, process.StartReused)
        self.port, self.pid = self.info.port, self.info.pid
        self.url = tensorboard_url(self.port, _databricks(spark))
        self._spark = spark
        self._stopped = threading.Event()
        self._on_stop: list = []
        self._after_run: threading.Thread | None = None  # see attach_tensorboard's keep_after_run

    def add_source(self, logdir: str, prefix: str = "", backend: str = "auto") -> None:
        """Mirror another log directory into this TensorBoard under ``prefix/`` (e.g. ``eval``
        for an evaluation job's curves). ``logdir`` is anything ``sources.open_source`` reads."""
        self.sync.add(open_source(logdir, sc=self._spark, backend=backend), prefix)
        self.sync.start()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def on_stop(self, undo) -> None:
        """Call ``undo()`` when the handle stops (in the order they were added)."""
        self._on_stop.append(undo)

    def run_ended(self, keep_after_run: float | None, name: str) -> None:
        """The run it shows ended: copy its last bytes now, and stop after ``keep_after_run``
        seconds (None: keep serving), on a thread of its own named ``name``."""
        self._after_run = threading.Thread(target=self._wind_down, args=(keep_after_run,), daemon=True, name=name)
        self._after_run.start()

    def _wind_down(self, keep_after_run: float | None) -> None:
        self.sync.tick(full=True)
        if keep_after_run is None:
            return
        if not self._stopped.wait(keep_after_run):
            self.stop()

    def stop(self) -> None:
        """Copy what the sources still hold, stop mirroring, and stop the TensorBoard process if
        this process started it. Idempotent."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        for undo in self._on_stop:
            undo()
        after = self._after_run
        if after is not None and after is not threading.current_thread():
            after.join(5)  # it ends once stopped (after its last copy)
        self.sync.stop(final_tick=True)
        if self.info.owner_pid == os.getpid():
            process.stop(self.info)

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else f"pid {self.pid}"
        return f"TensorBoardHandle(url={self.url!r}, logdir={self.mirror.root!r}, {state})"


def _databricks(spark: SparkBackend | None) -> DatabricksContext | None:
    """Where on Databricks the driver runs (its REPL context alone without Spark)."""
    return read_context(None, connect=False) if spark is None else spark.databricks()


def _start(mirror: Mirror, sources: list, spark: SparkBackend | None, port: int | None, interval: float,
           start_timeout: float, with_tensorflow: bool) -> TensorBoardHandle:
    where = _databricks(spark)
    sync = MirrorSync(mirror, interval)
    for source, prefix in sources:
        sync.add(source, prefix)
    if sources:
        sync.start()
    if port is not None:
        tensorboard_url(port, where)  # refuses a port the proxy cannot reach before starting anything
    try:
        outcome = process.start(mirror.root, port=port, ports=port_candidates(where), host=bind_host(where),
                                timeout=start_timeout, with_tensorflow=with_tensorflow)
    except BaseException:
        sync.stop(final_tick=False)
        raise
    return TensorBoardHandle(mirror, sync, outcome, spark)


def attach_tensorboard(run, mirror_root: str | None = None, remote_logdir: str | None = None, *,
                       port: int | None = None, keep_after_run: float | None = KEEP_AFTER_RUN_SECS,
                       interval: float = 0.5, backend: str = "auto", start_timeout: float = 60.0,
                       with_tensorflow: bool = False) -> TensorBoardHandle:
    """Start a live TensorBoard for ``run`` (before or after ``run.start()``).

    The mirror directory gets one subdirectory per node (``chief_0``, ``worker_1``...), fed by the
    bytes the nodes ship from node-local log directories and, when the run's log directory is
    shared storage, by reading it from the driver.

    Args:
        run: a ``tfos_notebook.Run``.
        mirror_root: the local mirror directory (default: one per run in the state directory).
        remote_logdir: a log directory to mirror from the driver (default: the run's log_dir when it
            is a URI or a path under ``/Volumes`` or ``/dbfs``); see ``sources.open_source``.
        port: the TensorBoard port (default: a free one; on Databricks one in 6006-6106 but the
            notebook's comm channel, listening on every interface for the driver proxy).
        keep_after_run: seconds the TensorBoard stays up after the run ends (None: until ``stop()``
            or this process exits).
        interval: seconds between mirror passes over the remote log directory.
        backend: how ``remote_logdir`` is read: ``auto``, ``hadoop``, ``fsspec`` or ``local``.
        start_timeout: seconds to wait for TensorBoard to answer.
        with_tensorflow: let TensorBoard import TensorFlow (see ``process.start``).

    Raises:
        TensorBoardError: TensorBoard did not start. LogdirError: ``remote_logdir`` cannot be read.
        ProxyPortError: on Databricks, ``port`` is the notebook's ipywidgets comm channel.
    """
    mirror = Mirror(mirror_root or os.path.join(process.state_dir(), "mirrors", run.run_id))
    if remote_logdir is None and is_shared_logdir(run.log_dir):
        remote_logdir = run.log_dir
    spark = run.backend
    sources = [(open_source(remote_logdir, sc=spark, backend=backend), "")] if remote_logdir else []
    sink = mirror.receive
    run.set_file_sink(sink)  # first: the nodes' bytes are kept while TensorBoard starts

    def detach() -> None:
        if run.file_sink == sink:
            run.set_file_sink(None)

    try:
        handle = _start(mirror, sources, spark, port, interval, start_timeout, with_tensorflow)
    except BaseException:
        detach()
        raise
    handle.on_stop(detach)
    run.events.publish(TensorBoardStarted(run.run_id, url=handle.url))

    def on_event(event) -> None:
        if isinstance(event, RunFinished) and not handle.stopped:
            handle.run_ended(keep_after_run, name=f"tfos-tb-after-{run.run_id}")

    handle.on_stop(run.events.subscribe(on_event))
    return handle


def serve_logdir(logdir: str, sc: Any = None, *, mirror_root: str | None = None, port: int | None = None,
                 interval: float = 0.5, backend: str = "auto", start_timeout: float = 60.0,
                 with_tensorflow: bool = False) -> TensorBoardHandle:
    """A live TensorBoard for any log directory, without a run (an earlier run, another job's logs).

    A plain local path is served as it is; anything else (``hdfs://``, ``dbfs:/``, ``/Volumes/``,
    ``/dbfs/``, ``s3a://``, fsspec URLs) is mirrored to a local directory first, read through ``sc`` (a
    SparkContext, a classic SparkSession or a ``SparkBackend``; its JVM) for Hadoop URIs. Runs until
    ``stop()`` or this process exits. Arguments as for ``attach_tensorboard``.
    """
    spark = None if sc is None else backend_for(sc)
    if not is_shared_logdir(logdir) and not logdir.startswith("file:") and backend in ("auto", "local"):
        return _start(Mirror(logdir), [], spark, port, interval, start_timeout, with_tensorflow)
    key = hashlib.sha256(logdir.encode()).hexdigest()[:16]
    mirror = Mirror(mirror_root or os.path.join(process.state_dir(), "mirrors", f"logdir-{key}"))
    return _start(mirror, [(open_source(logdir, sc=spark, backend=backend), "")], spark, port, interval,
                  start_timeout, with_tensorflow)
