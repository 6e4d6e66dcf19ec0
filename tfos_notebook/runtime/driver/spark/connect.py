"""The Spark backend on a Spark Connect session (``SparkSession.builder.remote(...)``, Databricks
standard access mode): no SparkContext, RDD or JVM in this process.

A barrier gang is a barrier ``mapInArrow`` over ``spark.range(0, n, 1, n)``; tags are session tags
(``addTag`` / ``interruptTag``). With no status store to read, the cluster is estimated: slots from
the session's conf where it says (``local[N]``, executor instances and cores), executors' hosts,
cores, GPU addresses and versions from a probe job run once per session, which also checks that
executors can open a connection to the driver host (where the control server listens; see
``probe.py``).
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import msgpack

from ...wire.barrier import BarrierFn, DataBarrierFn, PackedBarrierTask
from ..errors import ConfigError, TFOSError
from .backend import ClusterView, SparkBackend, is_connect
from .hadoopfs import HadoopFileSystem
from .probe import PROBE_DDL, Probe, ProbeTask, ReachListener

log = logging.getLogger(__name__)

#: How long the probe job may wait for a free slot and its Python workers before it is given up.
PROBE_TIMEOUT = 60.0
#: How long a probe's answer is reused.
PROBE_TTL = 600.0


class DriverUnreachable(TFOSError):
    """The executors cannot open a connection to the driver host, where the run's control server
    listens (a client outside the cluster: serverless, or ``remote()`` from a laptop)."""


class ConnectBackend(SparkBackend):
    """:class:`SparkBackend` on a Spark Connect session. Tags are session tags; cluster figures
    are estimates (``ClusterView.exact`` is False)."""

    kind = "connect"

    _latest: ConnectBackend | None = None
    _lock = threading.Lock()

    def __init__(self, session: Any) -> None:
        self.session = session
        self._probe: Probe | None = None
        self._probe_lock = threading.Lock()

    @classmethod
    def of(cls, session: Any) -> ConnectBackend:
        """The backend of the Spark Connect ``session`` (the same one for the same session).

        Raises:
            TypeError: ``session`` is not a Spark Connect session."""
        if not is_connect(session):
            raise TypeError(f"expected a Spark Connect session, got {type(session).__name__}")
        with cls._lock:
            if cls._latest is None or cls._latest.session is not session:
                cls._latest = cls(session)
            return cls._latest

    @classmethod
    def active(cls) -> ConnectBackend | None:
        """The backend of this process's active (or default) Spark Connect session, or None."""
        module = sys.modules.get("pyspark.sql.connect.session")
        if module is None:  # no Connect session was ever made in this process
            return None
        session = module.SparkSession.getActiveSession() or module.SparkSession._get_default_session()
        if session is None or session.is_stopped:
            return None
        return cls.of(session)

    # -- configuration -----------------------------------------------------------------------
    @property
    def master(self) -> str:
        return self.conf("spark.master") or ""

    def conf(self, key: str, default: str | None = None) -> str | None:
        try:
            value = self.session.conf.get(key, None)
        except Exception as e:  # a conf the server will not show: treated as unset
            log.debug("the server does not show the conf %s: %s", key, e)
            value = None
        return default if value is None else str(value)

    def default_fs(self) -> str:
        return self.conf("spark.hadoop.fs.defaultFS") or "file:///"

    # -- the cluster -------------------------------------------------------------------------
    def cluster(self, own_tag: str | None = None) -> ClusterView:
        probe = self.probe()
        return ClusterView(executors=probe.executors, total_slots=self._slots(probe), exact=False)

    def _slots(self, probe: Probe) -> int:
        """Tasks the cluster runs at once, from the conf where it says, else from the probe's cores."""
        task_cpus = int(self.conf("spark.task.cpus", "1"))
        match = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\d+)?\])?", self.master)
        cluster = re.fullmatch(r"local-cluster\[(\d+),\s*(\d+),\s*\d+\]", self.master)
        if match:
            n = match.group(1)
            cores = 1 if n is None else (sum(e.cores for e in probe.executors) or 1) if n == "*" else int(n)
            return cores // task_cpus
        if cluster:
            executors, cores = int(cluster.group(1)), int(cluster.group(2))
        else:
            instances, executor_cores = self.conf("spark.executor.instances"), self.conf("spark.executor.cores")
            if instances and executor_cores:
                executors, cores = int(instances), int(executor_cores)
            else:
                return sum(e.cores // task_cpus for e in probe.executors)
        per_executor = cores // task_cpus
        task_gpus = float(self.conf("spark.task.resource.gpu.amount", "0"))
        executor_gpus = float(self.conf("spark.executor.resource.gpu.amount", "0"))
        if task_gpus:
            per_executor = min(per_executor, int(executor_gpus // task_gpus))
        return executors * per_executor

    def probe(self, refresh: bool = False) -> Probe:
        """The executors as a probe job saw them (run at most once per ``PROBE_TTL`` seconds unless
        ``refresh``). A probe that gets no slot within ``PROBE_TIMEOUT`` seconds is cancelled and
        answers with no executors (and no reachability verdict)."""
        with self._probe_lock:
            if self._probe is None or refresh or time.monotonic() - self._probe.at > PROBE_TTL:
                self._probe = self._run_probe()
            return self._probe

    def _run_probe(self) -> Probe:
        try:
            listener = ReachListener(self.driver_host())
        except OSError as e:  # the driver host is not this machine: a client outside the cluster
            return Probe((), (f"this process cannot listen on {self.driver_host()} ({e})",), (), time.monotonic())
        try:
            task = ProbeTask(self.driver_host(), listener.port)
            tasks = max(1, self._conf_slots_hint())
            df = self.session.range(0, tasks, 1, tasks).mapInArrow(task, PROBE_DDL)
            job = self.submit(f"tfos-probe-{time.time_ns()}", "tfos_notebook cluster probe", df.collect)
            if not job.join(PROBE_TIMEOUT):
                job.cancel()
                return Probe((), (), (), time.monotonic())
            rows = job.result()
        finally:
            listener.close()
        return Probe.of(rows)

    def _conf_slots_hint(self) -> int:
        """Probe tasks to run: the slots the conf names (so that every executor likely gets one)."""
        try:
            return min(64, self._slots(Probe((), (), (), 0.0)))
        except ValueError as e:  # a conf that names no slot count: one probe task still answers
            log.debug("no slot count in the session's conf (%s): probing with one task", e)
            return 1

    def check_reachable(self) -> None:
        probe = self.probe()
        if probe.unreachable:
            raise DriverUnreachable(
                f"the executors cannot connect to this notebook's host {self.driver_host()} "
                f"({'; '.join(probe.unreachable[:3])}): training needs a client that runs on the cluster's "
                "driver, as a Databricks notebook attached to a cluster does (serverless compute and a "
                "remote() client outside the cluster cannot be reached). Attach the notebook to a cluster, or "
                "run it on the driver host")

    def task_errors(self, tag: str) -> tuple[str, ...]:
        return ()  # no status store: a failed task's error reaches the caller with the job's error

    # -- jobs --------------------------------------------------------------------------------
    def job_thread(self, target: Callable[[], None], name: str) -> threading.Thread:
        from pyspark import InheritableThread

        return InheritableThread(target=target, name=name, daemon=True, session=self.session)

    def set_tag(self, tag: str, description: str) -> None:
        self.session.addTag(tag)

    def clear_tag(self, tag: str) -> None:
        self.session.removeTag(tag)

    def cancel(self, tag: str) -> None:
        self.session.interruptTag(tag)

    def barrier(self, num_tasks: int, fn: BarrierFn) -> list[dict]:
        df = self.session.range(0, num_tasks, 1, num_tasks)
        rows = df.mapInArrow(PackedBarrierTask(fn), "part int, summary binary", barrier=True).collect()
        return [msgpack.unpackb(r.summary) for r in sorted(rows, key=lambda r: r.part)]

    def barrier_over(self, data: Any, fn: DataBarrierFn, schema: str) -> list:
        from pyspark import RDD

        if isinstance(data, RDD):
            raise ConfigError("a Spark Connect session has no RDDs: pass a DataFrame (spark.createDataFrame(...) "
                              "or spark.read...) instead")
        return super().barrier_over(data, fn, schema)

    # -- storage -----------------------------------------------------------------------------
    def hadoop_fs(self, uri: str) -> HadoopFileSystem:
        raise NotImplementedError(
            f"{uri!r} cannot be read through Hadoop here: a Spark Connect session has no JVM in this process. "
            "Use a FUSE path (a Unity Catalog volume, /Volumes/...) or an fsspec URL instead")

    def __repr__(self) -> str:
        return f"ConnectBackend({self.master!r})"
