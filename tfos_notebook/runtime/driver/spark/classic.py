"""The Spark backend on a SparkContext (a classic session: local, standalone, YARN, Kubernetes,
Databricks single-user clusters).

This module (with ``gather.py``, data gathered where its cached blocks are, ``frames.py``, a
DataFrame as the barrier stage reads it, and ``hadoopfs.py``, the Hadoop filesystems) is the only
one in the package that reaches into the SparkContext's JVM: the status store (executors, failed
task attempts), the scheduler's free slots, job groups and the Hadoop configuration.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from typing import Any

from ...wire.barrier import BarrierFn, BarrierTask, DataBarrierFn, RddBarrierTask
from ...wire.feed.protocol import FRAME_BYTES
from .backend import ClusterView, ExecutorInfo, SparkBackend, is_connect
from .frames import batched_by_bytes, cache_batches, frame_cache, gathered_frame
from .gather import evenly_coalesced, gathered
from .hadoopfs import JvmHadoopFileSystem

log = logging.getLogger(__name__)

#: How many task attempts of one stage attempt ``task_errors`` reads from the status store.
TASKS_PER_STAGE = 100


class ClassicBackend(SparkBackend):
    """:class:`SparkBackend` on a SparkContext. Tags are job groups; the cluster is read from the
    JVM status store, so its figures are exact."""

    kind = "classic"

    # A process has one SparkContext at a time: the backend of the latest one asked for is kept.
    _latest: ClassicBackend | None = None
    _lock = threading.Lock()

    def __init__(self, sc: Any) -> None:
        self.sc = sc
        self._conf: dict[str, str | None] = {}
        self._conf_copy: Any = None
        self._mapper: Any = None  # _as_json()'s, made on first use

    @classmethod
    def of(cls, spark: Any) -> ClassicBackend:
        """The backend of ``spark`` (a SparkContext or a classic SparkSession); calls with the
        process's current SparkContext all get the same one.

        Raises:
            TypeError: ``spark`` is neither (a Spark Connect session has no SparkContext)."""
        sc = _context_of(spark)
        with cls._lock:
            if cls._latest is None or cls._latest.sc is not sc:
                cls._latest = cls(sc)
            return cls._latest

    @classmethod
    def active(cls) -> ClassicBackend | None:
        """The backend of this process's active SparkContext (a classic SparkSession has one), or None."""
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        return None if sc is None else cls.of(sc)

    # -- configuration -----------------------------------------------------------------------
    @property
    def master(self) -> str:
        return str(self.sc.master)

    def conf(self, key: str, default: str | None = None) -> str | None:
        if key not in self._conf:  # a running SparkContext's conf no longer changes: each key is read once
            try:  # from one copy: sc.getConf() copies every key into a new conf, a gateway call each
                if self._conf_copy is None:
                    self._conf_copy = self.sc.getConf()
                self._conf[key] = self._conf_copy.get(key)
            except Exception as e:  # the gateway refused it: treated as unset
                log.debug("cannot read the conf %s: %s", key, e)
                return default
        value = self._conf[key]
        return default if value is None else value

    def spark_context(self) -> Any:
        return self.sc

    def driver_gpus(self) -> list[str]:
        resources = self.sc.resources
        return list(resources["gpu"].addresses) if "gpu" in resources else []

    def default_fs(self) -> str:
        return self.sc._jsc.hadoopConfiguration().get("fs.defaultFS") or "file:///"

    # -- the cluster -------------------------------------------------------------------------
    def cluster(self, own_tag: str | None = None) -> ClusterView:
        busy, jobs = self._busy(own_tag)
        return ClusterView(executors=self._executors(), total_slots=self._total_slots(), busy_slots=busy,
                           other_jobs=jobs, expected_executors=self._expected_executors())

    def _executors(self) -> tuple[ExecutorInfo, ...]:
        """The executors registered now (the driver excluded, except in local mode), read from the
        status store as the JSON Spark's REST API serves, in three gateway calls. (Field by field
        it took about 40 calls and 20-30 ms a launch, and every Java iterator ends by raising an
        exception that pyspark converts in 10-15 ms.)"""
        summaries = self._as_json(self.sc._jsc.sc().statusStore().executorList(True))
        with_driver, now = self._local_mode, time.time()
        return tuple(
            ExecutorInfo(e["id"], e["hostPort"].rsplit(":", 1)[0], int(e["totalCores"]),
                         tuple(e.get("resources", {}).get("gpu", {}).get("addresses", ())),
                         age=now - e["addTime"] / 1000 if isinstance(e.get("addTime"), (int, float)) else None)
            for e in summaries if with_driver or e["id"] != "driver")

    def decommissioning(self, executor_ids: set[str]) -> dict[str, str]:
        """Read from the scheduler (``TaskSchedulerImpl.getExecutorDecommissionState``), which marks
        an executor as soon as the cluster manager or the executor says it leaves: a standalone
        worker or executor sent SIGPWR, a Kubernetes pod being deleted, YARN's graceful
        decommission, a Databricks spot node being reclaimed (``spark.decommission.enabled``)."""
        scheduler = self.sc._jsc.sc().taskScheduler()
        leaving = {}
        for executor_id in executor_ids:
            state = scheduler.getExecutorDecommissionState(executor_id)
            if state.isDefined():
                host = state.get().workerHost()
                leaving[executor_id] = str(host.get()) if host.isDefined() else ""
        return leaving

    def _as_json(self, status: Any) -> Any:
        """A status store object (Scala) as the JSON Spark's REST API serves of it, parsed, in one
        gateway call (a Jackson mapper in the JVM, made on first use)."""
        if self._mapper is None:
            jvm = self.sc._jvm
            mapper = jvm.com.fasterxml.jackson.databind.ObjectMapper()
            mapper.registerModule(jvm.com.fasterxml.jackson.module.scala.DefaultScalaModule())
            self._mapper = mapper
        return json.loads(self._mapper.writeValueAsString(status))

    def _total_slots(self) -> int:
        """Tasks the cluster can run at once for the default resource profile."""
        jsc = self.sc._jsc.sc()
        return int(jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))

    @property
    def _local_mode(self) -> bool:
        """Whether the driver runs the tasks itself (``local``, ``local[N]``), not executors of its own
        (``local-cluster[N,C,M]``, Spark's test cluster, starts N executor processes)."""
        return self.master.startswith("local") and not self.master.startswith("local-cluster")

    def _expected_executors(self) -> int | None:
        cluster = re.fullmatch(r"local-cluster\[\s*(\d+)\s*,.*\]", self.master)
        if cluster:
            return int(cluster.group(1))
        if self._local_mode:
            return None
        instances = self.conf("spark.executor.instances")
        if instances:
            return int(instances)
        cores_max, cores = self.conf("spark.cores.max"), self.conf("spark.executor.cores")
        if cores_max and cores:
            return int(cores_max) // int(cores)
        return None

    def _busy(self, own_tag: str | None) -> tuple[int, tuple[str, ...]]:
        """Slots held by running tasks of other jobs than ``own_tag``'s, and those jobs."""
        tracker = self.sc.statusTracker()
        busy, jobs = 0, []
        active = tracker.getActiveJobsIds()  # first: a job of ours started in between is then in ``own``
        own = set(tracker.getJobIdsForGroup(own_tag)) if own_tag else set()
        for job_id in active:
            if job_id in own:
                continue
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            stages = [tracker.getStageInfo(s) for s in job.stageIds]
            running = sum(stage.numActiveTasks for stage in stages if stage is not None)
            busy += running
            described = f" '{description}'" if (description := self._job_description(job_id)) else ""
            jobs.append(f"job {job_id}{described} ({running} running task(s), stages {list(job.stageIds)})")
        return busy, tuple(jobs)

    def _job_description(self, job_id: int) -> str:
        """The job's description (a run's job says which run and attempt it carries), or ""."""
        try:
            description = self.sc._jsc.sc().statusStore().job(job_id).description()
        except Exception as e:  # not in the status store (yet, or any more): an unnamed job
            log.debug("job %s has no description in the status store: %s", job_id, e)
            return ""
        return str(description.get()) if description.isDefined() else ""

    def task_errors(self, tag: str) -> tuple[str, ...]:
        tracker, store = self.sc.statusTracker(), self.sc._jsc.sc().statusStore()
        errors = []
        for job_id in tracker.getJobIdsForGroup(tag):
            job = tracker.getJobInfo(job_id)
            for stage_id in (job.stageIds if job else []):
                stage = tracker.getStageInfo(stage_id)
                for attempt in range(stage.currentAttemptId + 1 if stage else 0):
                    # as JSON: a Scala Seq has no Java view that Scala 2.12 (Spark 3.5) and 2.13 share
                    for task in self._as_json(store.taskList(stage_id, attempt, TASKS_PER_STAGE)):
                        if task.get("errorMessage"):
                            errors.append(str(task["errorMessage"]))
        return tuple(errors)

    # -- jobs --------------------------------------------------------------------------------
    def set_tag(self, tag: str, description: str) -> None:
        self.sc.setJobGroup(tag, description, interruptOnCancel=True)

    def clear_tag(self, tag: str) -> None:
        if self.sc.getLocalProperty("spark.jobGroup.id") == tag:
            self.sc._jsc.clearJobGroup()

    def cancel(self, tag: str) -> None:
        self.sc.cancelJobGroup(tag)

    def barrier(self, num_tasks: int, fn: BarrierFn) -> list[dict]:
        rdd = self.sc.parallelize(range(num_tasks), num_tasks)
        return rdd.barrier().mapPartitions(BarrierTask(fn)).collect()

    def barrier_over(self, data: Any, fn: DataBarrierFn, schema: str) -> list:
        from pyspark import RDD

        if isinstance(data, RDD):
            return data.barrier().mapPartitions(RddBarrierTask(fn)).collect()
        return super().barrier_over(batched_by_bytes(data, FRAME_BYTES), fn, schema)

    def partitions(self, data: Any) -> int | None:
        from pyspark import RDD

        if isinstance(data, RDD):
            return data.getNumPartitions()
        execution = data._jdf.queryExecution()
        if execution.executedPlan().getClass().getSimpleName() == "AdaptiveSparkPlanExec":
            return None  # its partitions are known only once its shuffles ran
        return execution.toRdd().getNumPartitions()

    # -- storage -----------------------------------------------------------------------------
    def hadoop_fs(self, uri: str) -> JvmHadoopFileSystem:
        return JvmHadoopFileSystem(self.sc, uri)

    def gatherable(self, data: Any, n: int) -> bool:
        from pyspark import RDD

        if isinstance(data, RDD):
            return evenly_coalesced(data._jrdd, n)
        cache = frame_cache(data)
        return cache is not None and evenly_coalesced(cache_batches(cache), n)

    def gather(self, data: Any, n: int) -> tuple[Any, Any] | None:
        from pyspark import RDD
        from pyspark.serializers import NoOpSerializer

        task_cpus = int(self.conf("spark.task.cpus", "1"))
        if isinstance(data, RDD):
            copy = gathered(self.sc, self._as_json, data._jrdd, n, task_cpus)
            return RDD(copy, self.sc, NoOpSerializer()), copy
        cache = frame_cache(data)
        return None if cache is None else gathered_frame(self.sc, self._as_json, data, cache, n, task_cpus)

    def __repr__(self) -> str:
        return f"ClassicBackend({self.master!r})"


def _context_of(spark: Any) -> Any:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if isinstance(spark, SparkContext):
        return spark
    if isinstance(spark, SparkSession):
        return spark.sparkContext
    if is_connect(spark):
        raise TypeError("a Spark Connect session has no SparkContext: the classic Spark backend needs a "
                        "SparkContext or a classic SparkSession")
    raise TypeError(f"expected a SparkContext or a SparkSession, got {type(spark).__name__}")
