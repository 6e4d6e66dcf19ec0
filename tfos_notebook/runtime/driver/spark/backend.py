"""The one seam between tfos_notebook and Spark.

Everything the package needs from Spark goes through a :class:`SparkBackend`: the cluster's
executors and slots, configuration, running a job under a tag of its own and cancelling it, a
barrier gang of tasks, and the cluster's Hadoop filesystems. Nothing else in the package touches a
SparkContext, a SparkSession's internals or the JVM.

:class:`~tfos_notebook.runtime.driver.spark.classic.ClassicBackend` implements it on a SparkContext (the
JVM status store gives executors and slots exactly). A Spark Connect session has no SparkContext,
RDD or JVM: its implementation runs the gang as a barrier ``mapInArrow`` job under a session tag
(``addTag`` / ``interruptTag``), and answers slots from the session's conf and a probe job,
marking such figures as estimates (``ClusterView.exact``).
"""

from __future__ import annotations

import logging
import socket
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ...wire.barrier import ArrowBarrierTask, BarrierFn, DataBarrierFn
from .databricks import DatabricksContext, read_context
from .hadoopfs import HadoopFileSystem

log = logging.getLogger(__name__)

T = TypeVar("T")

@dataclass(frozen=True)
class ExecutorInfo:
    """One executor: its id, host, cores, the GPU addresses Spark gave it, and how many seconds
    ago it registered, when read (None where unknown)."""

    executor_id: str
    host: str
    cores: int = 0
    gpus: tuple[str, ...] = ()
    age: float | None = None


@dataclass(frozen=True)
class ClusterView:
    """What the cluster looks like now, for pre-flight and diagnosis.

    ``busy_slots`` / ``other_jobs`` count running tasks of jobs other than the caller's own tag;
    ``expected_executors`` is how many executors the application asked for (None: unknown);
    ``exact`` is False where figures are estimates (no status store to read)."""

    executors: tuple[ExecutorInfo, ...]
    total_slots: int
    busy_slots: int = 0
    other_jobs: tuple[str, ...] = ()
    expected_executors: int | None = None
    exact: bool = True

    @property
    def free_slots(self) -> int:
        """Slots no other job of this application holds now (a barrier gang needs all its own at once)."""
        return max(0, self.total_slots - self.busy_slots)


class SparkJob(Generic[T]):
    """A Spark job running on a background thread under a tag of its own, so that it can be
    cancelled without touching the caller's other jobs. Made by :meth:`SparkBackend.submit`."""

    def __init__(self, backend: SparkBackend, tag: str, description: str, body: Callable[[], T]) -> None:
        self.backend, self.tag, self.description = backend, tag, description
        self._body = body
        self._result: T | None = None
        self.error: BaseException | None = None
        self._thread = backend.job_thread(self._run, name=f"tfos-job-{tag}")
        self._thread.start()

    def _run(self) -> None:
        try:
            self.backend.set_tag(self.tag, self.description)
            self._result = self._body()
        except BaseException as e:  # Py4JJavaError, SparkConnectException...: the caller summarises
            self.error = e
        finally:
            self.backend.clear_tag(self.tag)

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds; whether the job has ended."""
        self._thread.join(timeout)
        return self.done

    def cancel(self) -> None:
        """Cancel the job's tasks (interrupting them); the job then ends with an error."""
        if not self.done:
            self.backend.cancel(self.tag)

    def result(self) -> T:
        """The body's return value once ended; raises the job's error."""
        if not self.done:
            raise RuntimeError(f"Spark job {self.tag} is still running")
        if self.error is not None:
            raise self.error
        return self._result  # type: ignore[return-value]


class SparkBackend(ABC):
    """Spark, as tfos_notebook uses it. One instance per SparkContext / session."""

    #: ``"classic"`` or ``"connect"``.
    kind: str = ""
    _databricks_ctx: DatabricksContext | None = None
    _databricks_read = False
    _master_silent = False  # a standalone master's UI did not answer granted_cores()

    # -- configuration -----------------------------------------------------------------------
    @property
    @abstractmethod
    def master(self) -> str:
        """``spark.master`` (``local[4]``, ``spark://...``, ``yarn``...)."""

    @abstractmethod
    def conf(self, key: str, default: str | None = None) -> str | None:
        """A Spark conf value as the application sees it, or ``default``: also when reading it
        raises (``[CONFIG_NOT_AVAILABLE]`` on some Databricks compute), so that no conf read can
        break a launch."""

    def databricks(self) -> DatabricksContext | None:
        """Where on Databricks this driver runs (read once), or None off Databricks."""
        if not self._databricks_read:
            self._databricks_ctx = read_context(self.conf, connect=self.kind == "connect")
            self._databricks_read = True
        return self._databricks_ctx

    def driver_host(self) -> str:
        """The driver address executors reach (where the control server binds): ``spark.driver.host``;
        where it cannot be read, this host's own address on Databricks (executors on other machines
        never reach 127.0.0.1), else 127.0.0.1."""
        host = self.conf("spark.driver.host")
        if host:
            return host
        if self.databricks() is not None:
            try:
                return socket.gethostbyname(socket.gethostname())
            except OSError as e:
                log.warning("spark.driver.host cannot be read and this host's address is unknown (%s)", e)
        return "127.0.0.1"

    def driver_gpus(self) -> list[str]:
        """GPU addresses Spark's resources give the driver process itself (none where this process
        is not the driver, as with a Spark Connect client)."""
        return []

    def spark_context(self) -> Any | None:
        """The SparkContext, for programs that ask for one; None where this process has none (a
        Spark Connect client)."""
        return None

    @abstractmethod
    def default_fs(self) -> str:
        """Hadoop's ``fs.defaultFS`` (``file:///`` when unknown): ``ctx.defaultFS`` on the nodes."""

    # -- the cluster -------------------------------------------------------------------------
    @abstractmethod
    def cluster(self, own_tag: str | None = None) -> ClusterView:
        """Executors, slots and other jobs now; tasks of ``own_tag``'s jobs are not "other jobs"."""

    def slot_holders(self) -> tuple[str, ...]:
        """What holds the cluster's cores outside this application, one line each, as the cluster
        manager tells: a standalone master's JSON (at ``spark.master.ui.port``) lists the other
        applications and their cores. Empty where it cannot tell (other cluster managers, the UI
        off or unreachable). Best effort, and up to a second: call it only while a launch waits."""
        from .standalone import master_state_of, other_applications

        state = master_state_of(self.master, self.conf)
        return () if state is None else other_applications(state, self.conf("spark.app.id") or "")

    def granted_cores(self) -> int | None:
        """The cores a standalone master granted this application: its executors' cores, registered
        or still starting. None elsewhere, or when the master's UI does not answer (then it is not
        asked again)."""
        from .standalone import granted_cores, master_state_of

        if self._master_silent or not self.master.startswith("spark://"):
            return None
        state = master_state_of(self.master, self.conf)
        self._master_silent = state is None
        return None if state is None else granted_cores(state, self.conf("spark.app.id") or "")

    def decommissioning(self, executor_ids: set[str]) -> dict[str, str]:
        """Which of ``executor_ids`` Spark's scheduler holds as decommissioning, with the host each
        leaves (its worker's host where Spark knows it). Empty where the scheduler cannot be read
        from this process (Spark Connect: the driver's JVM is the server's): a leaving executor is
        then seen only once it is gone."""
        return {}

    def check_reachable(self) -> None:
        """Raise a ``TFOSError`` saying what to do when the executors cannot open connections to
        :meth:`driver_host` (nothing to check where the driver runs in this process)."""
        return None

    @abstractmethod
    def task_errors(self, tag: str) -> tuple[str, ...]:
        """Error messages of failed task attempts in the jobs run under ``tag`` (best effort)."""

    # -- jobs --------------------------------------------------------------------------------
    def job_thread(self, target: Callable[[], None], name: str) -> threading.Thread:
        """A thread that carries the calling thread's Spark properties (local properties, tags)."""
        from pyspark import InheritableThread

        return InheritableThread(target=target, name=name, daemon=True)

    @abstractmethod
    def set_tag(self, tag: str, description: str) -> None:
        """Put the calling thread's next jobs under ``tag`` (a job group on a SparkContext)."""

    @abstractmethod
    def clear_tag(self, tag: str) -> None:
        """Undo :meth:`set_tag` for the calling thread."""

    @abstractmethod
    def cancel(self, tag: str) -> None:
        """Cancel every job under ``tag``, interrupting its tasks."""

    def submit(self, tag: str, description: str, body: Callable[[], T]) -> SparkJob[T]:
        """Run ``body`` (which runs Spark jobs) on a background thread under ``tag``."""
        return SparkJob(self, tag, description, body)

    @abstractmethod
    def barrier(self, num_tasks: int, fn: BarrierFn) -> list[dict]:
        """Run ``fn`` in a barrier stage of ``num_tasks`` tasks (all start together or none) and
        collect what each returns, in partition order. Blocks: call it inside :meth:`submit`."""

    def barrier_over(self, data: Any, fn: DataBarrierFn, schema: str) -> list:
        """Run ``fn`` in a barrier stage over ``data``, one task per partition (all start together
        or none), and collect what the tasks yield. A DataFrame runs as a barrier ``mapInArrow``
        whose output has the DDL ``schema`` (collected as Rows); an RDD only on a backend with RDDs.
        Blocks: call it inside :meth:`submit`."""
        from pyspark.sql import DataFrame

        if not isinstance(data, DataFrame):
            raise TypeError(f"a barrier stage over data takes a DataFrame here, got {type(data).__name__}")
        return data.mapInArrow(ArrowBarrierTask(fn), schema, barrier=True).collect()

    def partitions(self, data: Any) -> int | None:
        """How many partitions ``data`` (an RDD or DataFrame) has, where that is known without
        running a Spark job; None where it is not (here: always)."""
        return None

    def gatherable(self, data: Any, n: int) -> bool:
        """Whether ``data`` (an RDD of pickled batches, or a DataFrame) can be gathered into ``n``
        partitions, as many whole ones to each, with no shuffle (:meth:`gather`); here, never."""
        return False

    def gather(self, data: Any, n: int) -> tuple[Any, Any] | None:
        """``data`` coalesced into ``n`` partitions with no shuffle into a copy marked for a local
        checkpoint, which the first job computing it writes, in the executors' memory or on their
        disks: what a barrier stage runs over (an RDD of the pickled batches, or a DataFrame
        reading the copy) and the copy (a JavaRDD); None for a DataFrame it cannot gather after all."""
        raise NotImplementedError(f"{type(self).__name__} has no RDDs to gather")

    # -- storage -----------------------------------------------------------------------------
    @abstractmethod
    def hadoop_fs(self, uri: str) -> HadoopFileSystem:
        """The directory ``uri`` on the cluster's Hadoop filesystems; raises ``NotImplementedError``
        where the session has no JVM to read it (Spark Connect: use fsspec or a FUSE path)."""


def is_connect(session: Any) -> bool:
    """Whether ``session`` is a Spark Connect session (no SparkContext, RDD or JVM in this process)."""
    return type(session).__module__.startswith("pyspark.sql.connect.")

