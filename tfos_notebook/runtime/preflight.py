"""Pre-flight: read the live cluster into a ``Snapshot`` and diagnose it before submitting.

Spark's own check for a barrier stage that needs more slots than exist retries every 15 s for
about 10 minutes and reports the reason only in the driver log; this answers in well under a
second once the executors are registered.
"""

from __future__ import annotations

import time

from .diagnose import ExecutorInfo, Snapshot


def _scala_list(sc, seq) -> list:
    return list(sc._jvm.scala.jdk.javaapi.CollectionConverters.asJava(seq))


def executors(sc) -> tuple[ExecutorInfo, ...]:
    """The executors registered now (the driver excluded, except in local mode)."""
    infos = []
    for e in _scala_list(sc, sc._jsc.sc().statusStore().executorList(True)):
        eid = e.id()
        if eid == "driver" and not sc.master.startswith("local"):
            continue
        gpus: tuple[str, ...] = ()
        resources = sc._jvm.scala.jdk.javaapi.CollectionConverters.asJava(e.resources())
        if resources.containsKey("gpu"):
            gpus = tuple(resources.get("gpu").addresses())
        infos.append(ExecutorInfo(eid, e.hostPort().rsplit(":", 1)[0], int(e.totalCores()), gpus))
    return tuple(infos)


def total_slots(sc) -> int:
    """Tasks the cluster can run at once for the default resource profile."""
    jsc = sc._jsc.sc()
    return int(jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))


def _expected_executors(sc) -> int | None:
    conf = sc.getConf()
    if sc.master.startswith("local"):
        return None
    if conf.get("spark.executor.instances"):
        return int(conf.get("spark.executor.instances"))
    cores_max, cores = conf.get("spark.cores.max"), conf.get("spark.executor.cores")
    if cores_max and cores:
        return int(cores_max) // int(cores)
    return None


def _busy(sc, own_group: str | None) -> tuple[int, tuple[str, ...]]:
    """Slots held by running tasks of other jobs than ``own_group``'s, and those jobs."""
    tracker = sc.statusTracker()
    busy, jobs = 0, []
    own = set(tracker.getJobIdsForGroup(own_group)) if own_group else set()
    for job_id in tracker.getActiveJobsIds():
        if job_id in own:
            continue
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        running = sum(
            (tracker.getStageInfo(s).numActiveTasks if tracker.getStageInfo(s) else 0) for s in job.stageIds
        )
        busy += running
        jobs.append(f"job {job_id} ({running} running task(s), stages {list(job.stageIds)})")
    return busy, tuple(jobs)


def task_errors(sc, job_group: str) -> tuple[str, ...]:
    """Error messages of failed task attempts in the jobs of ``job_group`` (every stage attempt)."""
    tracker, store = sc.statusTracker(), sc._jsc.sc().statusStore()
    errors = []
    for job_id in tracker.getJobIdsForGroup(job_group):
        job = tracker.getJobInfo(job_id)
        for stage_id in (job.stageIds if job else []):
            stage = tracker.getStageInfo(stage_id)
            for attempt in range(stage.currentAttemptId + 1 if stage else 0):
                for task in _scala_list(sc, store.taskList(stage_id, attempt, 100)):
                    message = task.errorMessage()
                    if message.isDefined():
                        errors.append(str(message.get()))
    return tuple(errors)


def snapshot(sc, requested_tasks: int, roles: tuple[str, ...] = (), gpus_per_node: int = 0,
             elapsed: float = 0.0, own_group: str | None = None, **live) -> Snapshot:
    """A ``Snapshot`` of the cluster now; ``own_group`` is the launch's job group (its tasks are not
    "other jobs"); ``live`` adds what a launch in progress knows (registered, stalled_for,
    task_errors, leftovers, versions, driver_versions)."""
    conf = sc.getConf()
    busy, jobs = _busy(sc, own_group)
    return Snapshot(
        requested_tasks=requested_tasks,
        roles=roles,
        total_slots=total_slots(sc),
        busy_slots=busy,
        other_jobs=jobs,
        executors=executors(sc),
        expected_executors=_expected_executors(sc),
        dynamic_allocation=conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true",
        master=sc.master,
        task_gpus=float(conf.get("spark.task.resource.gpu.amount", "0")),
        executor_gpus=int(float(conf.get("spark.executor.resource.gpu.amount", "0"))),
        gpus_per_node=gpus_per_node,
        elapsed=elapsed,
        **live,
    )


def wait_for_executors(sc, requested_tasks: int, timeout: float) -> None:
    """Give executors that are still starting up to ``timeout`` seconds to register."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        expected = _expected_executors(sc)
        if expected is None or len(executors(sc)) >= expected or total_slots(sc) >= requested_tasks:
            return
        time.sleep(0.25)
