"""Why a launch cannot proceed: a pure function from a snapshot of the cluster to findings.

``diagnose(snapshot)`` looks at nothing but its argument, so every finding can be tested from a
hand-made snapshot without a cluster. ``preflight.snapshot`` fills a snapshot from a live cluster
through its Spark backend. Findings about what the nodes report are in ``nodefindings.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..wire.orphans import Leftover
from .finding import BLOCKER, WARNING, Finding, blockers, tail
from .nodefindings import leftover_findings, version_findings
from .spark.backend import ExecutorInfo
from .spark.databricks import AccessMode, DatabricksContext


@dataclass(frozen=True)
class Snapshot:
    """What is known about the cluster and the launch at one moment.

    Args:
        requested_tasks: barrier tasks the launch needs (one per node).
        roles: planned ``role:index`` of each task, for the evidence lines.
        total_slots: tasks the cluster can run at once for the launch's resource profile.
        busy_slots: slots held by other running jobs.
        executors: executors registered now.
        expected_executors: executors the application asked for (None when unknown).
        dynamic_allocation: whether ``spark.dynamicAllocation.enabled`` is true.
        master: the Spark master URL.
        task_gpus: ``spark.task.resource.gpu.amount`` (0 when unset).
        executor_gpus: ``spark.executor.resource.gpu.amount`` (0 when unset).
        gpus_per_node: GPUs the user asked for per node (0 for CPU-only).
        elapsed: seconds since the launch began.
        other_jobs: descriptions of the other running jobs.
        holders: what holds the cluster's cores outside this application, as the cluster manager
            tells (``SparkBackend.slot_holders``; asked only while a launch waits for slots).
        leftovers: processes of earlier runs still alive, and foreign processes holding GPUs.
        registered: ``role:index`` of the nodes registered so far (during a launch).
        stalled_for: seconds since the last registration (during a launch).
        task_errors: errors of failed attempts of the launch's Spark tasks.
        versions: ``(role:index, python, tensorflow)`` each registered node reported ("" when absent).
        driver_versions: the driver's ``(python, tensorflow)``.
        exact: False when slots and executors are estimates (Spark Connect: the session's conf and
            a probe job instead of the scheduler's state); findings resting on them say so.
        databricks: where on Databricks the driver runs (None off Databricks).
    """

    requested_tasks: int
    roles: tuple[str, ...] = ()
    total_slots: int = 0
    busy_slots: int = 0
    executors: tuple[ExecutorInfo, ...] = ()
    expected_executors: int | None = None
    dynamic_allocation: bool = False
    master: str = ""
    task_gpus: float = 0
    executor_gpus: int = 0
    gpus_per_node: int = 0
    elapsed: float = 0.0
    other_jobs: tuple[str, ...] = field(default=())
    leftovers: tuple[Leftover, ...] = ()
    registered: tuple[str, ...] = ()
    stalled_for: float = 0.0
    task_errors: tuple[str, ...] = ()
    versions: tuple[tuple[str, str, str], ...] = ()
    driver_versions: tuple[str, str] = ("", "")
    exact: bool = True
    holders: tuple[str, ...] = ()
    databricks: DatabricksContext | None = None

    @property
    def executors_pending(self) -> int:
        if self.expected_executors is None:
            return 0
        return max(0, self.expected_executors - len(self.executors))

    @property
    def awaiting_executors(self) -> bool:
        """Executors may still come: some the application asked for are missing, or (with no
        executor count set) none has registered and there is no slot at all, as right after a
        session starts on a cluster manager (local mode always has its slots)."""
        return bool(self.executors_pending) or (
            self.expected_executors is None and not self.executors and not self.total_slots and self.exact)


def _executor_lines(s: Snapshot) -> tuple[str, ...]:
    if not s.executors:
        return ("no executors are registered with the driver",)
    return tuple(
        f"executor {e.executor_id} on {e.host}: {e.cores} core(s)" + (f", GPUs {list(e.gpus)}" if e.gpus else "")
        for e in s.executors
    )


def diagnose(s: Snapshot) -> list[Finding]:
    """Every reason the launch described by ``s`` cannot start (or should worry the user)."""
    findings: list[Finding] = compute_findings(s.databricks, s.gpus_per_node)
    if s.dynamic_allocation:
        findings.append(Finding(
            "dynamic_allocation",
            "dynamic allocation is on, and Spark refuses barrier-mode stages with it",
            ("spark.dynamicAllocation.enabled=true",),
            "start the session with spark.dynamicAllocation.enabled=false and a fixed number of "
            "executors (spark.executor.instances, or spark.cores.max on standalone)",
        ))
    if s.gpus_per_node and not s.task_gpus:
        findings.append(Finding(
            "gpus_not_configured",
            f"{s.gpus_per_node} GPU(s) per node were asked for, but Spark assigns no GPUs to tasks",
            ("spark.task.resource.gpu.amount is not set", f"spark.executor.resource.gpu.amount={s.executor_gpus}"),
            f"set spark.executor.resource.gpu.amount and spark.task.resource.gpu.amount={s.gpus_per_node} "
            "(with a GPU discovery script on the workers), or launch without GPUs",
        ))
    elif s.gpus_per_node and s.task_gpus < s.gpus_per_node:
        findings.append(Finding(
            "gpus_too_few",
            f"{s.gpus_per_node} GPU(s) per node were asked for, but each task gets {s.task_gpus:g}",
            (f"spark.task.resource.gpu.amount={s.task_gpus:g}",),
            f"set spark.task.resource.gpu.amount={s.gpus_per_node}, or ask for {s.task_gpus:g} GPU(s) per node",
        ))
    if s.requested_tasks > s.total_slots:
        if s.awaiting_executors:
            pending = s.executors_pending
            findings.append(Finding(
                "executors_pending",
                f"{pending} executor(s) the application asked for have not registered yet" if pending
                else "no executor has registered with the application yet",
                (f"{len(s.executors)} of {s.expected_executors or 'an unknown number of'} executors registered "
                 f"after {s.elapsed:.0f}s", *_executor_lines(s)),
                "nothing to do if they are starting: the launch waits for them (up to reservation_timeout); if "
                "they never come, the cluster lacks free cores or memory for them (see the master's UI)",
                WARNING,
            ))
        else:
            roles = f" ({', '.join(s.roles)})" if s.roles else ""
            findings.append(Finding(
                "not_enough_slots",
                f"the launch needs {s.requested_tasks} task slots at once but the cluster has "
                f"{s.total_slots}",
                (f"requested {s.requested_tasks} nodes{roles}",
                 f"slots for this resource profile: {s.total_slots} (executors x cores per executor / "
                 "spark.task.cpus, and GPUs per executor / spark.task.resource.gpu.amount)",
                 *_estimate_lines(s), *_executor_lines(s)),
                f"ask for at most {s.total_slots} nodes, or give the application more executors or cores "
                "(spark.executor.instances, spark.cores.max, spark.executor.cores)",
                BLOCKER if s.exact else WARNING, not s.exact,
            ))
    elif s.requested_tasks > s.total_slots - s.busy_slots and s.busy_slots:
        findings.append(Finding(
            "slots_held_by_other_jobs",
            f"{s.busy_slots} of {s.total_slots} slots are held by other running jobs, so the launch "
            "waits until they finish",
            (f"requested {s.requested_tasks} nodes, free slots now {s.total_slots - s.busy_slots}",
             *(f"running: {j}" for j in s.other_jobs)),
            "wait for those jobs, cancel them (sc.cancelJobGroup / the Spark UI), or ask for fewer nodes",
            WARNING,
        ))
    findings += leftover_findings(s.leftovers, s.gpus_per_node)
    findings += version_findings(s.versions, s.driver_versions)
    if s.task_errors:
        findings.append(Finding(
            "node_crashed_before_registering",
            f"{len(s.task_errors)} Spark task attempt(s) of the launch failed before their node registered",
            tuple(tail(e) for e in s.task_errors[-3:]),
            "read the error above; a ModuleNotFoundError usually means tfos_notebook or its dependencies are "
            "not installed on the executors (install them as a cluster library)",
        ))
    if not s.exact and not s.registered and s.stalled_for and not blockers(findings):
        findings.append(Finding(
            "gang_not_started",
            f"none of the {s.requested_tasks} nodes has started after {s.stalled_for:.0f}s: Spark has not "
            "scheduled the gang, which needs all its slots free at once",
            (f"requested {s.requested_tasks} nodes; slots (estimated): {s.total_slots}", *_estimate_lines(s),
             *_executor_lines(s)),
            "not enough free slots (other jobs hold some, or the cluster has fewer than estimated), or dynamic "
            "allocation is on: stop the run, then free slots, ask for fewer nodes, or turn dynamic allocation off; "
            "Spark itself gives up only after spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures tries "
            "(about 10 minutes)",
            WARNING, True,
        ))
    if s.registered and len(s.registered) < s.requested_tasks and s.stalled_for and not blockers(findings):
        missing = [r for r in s.roles if r not in s.registered]
        findings.append(Finding(
            "registration_stalled",
            f"{len(s.registered)} of {s.requested_tasks} nodes registered; none for {s.stalled_for:.0f}s",
            (f"registered: {', '.join(s.registered)}", f"missing: {', '.join(missing)}", *_executor_lines(s)),
            "the missing nodes' tasks have not started: check the Spark UI for pending tasks and the "
            "executors' stderr; other jobs or a lost executor can hold their slots",
            WARNING,
        ))
    return findings


STANDARD_COMPUTE = "https://docs.databricks.com/compute/access-mode-limitations.html"


def compute_findings(where: DatabricksContext | None, gpus_per_node: int) -> list[Finding]:
    """What is known not to work on the Databricks compute the driver runs on, said before the
    launch: standard access mode and serverless compute run user code and UDFs in sandboxes
    (Lakeguard), and nothing shows a task there opening a connection to the notebook, which every
    node needs; standard compute offers no GPUs."""
    if where is None or where.access_mode not in (AccessMode.STANDARD, AccessMode.SERVERLESS):
        return []
    sandbox = ("user code and UDFs run in isolated sandboxes (Lakeguard), and no public source shows a task there "
               "opening a TCP connection to the notebook, which every node needs for its control channel")
    if where.access_mode is AccessMode.SERVERLESS:
        return [Finding(
            "databricks_serverless",
            "this notebook runs on Databricks serverless compute, where training is not expected to work",
            (f"serverless compute: {where.access_mode_source}", f"on serverless compute {sandbox}",
             "serverless compute offers Spark Connect only, and no FUSE for DBFS root (/dbfs)"),
            "attach the notebook to a classic cluster in dedicated (single user) access mode, with a Databricks "
            "Runtime for ML for TensorFlow and GPUs",
            WARNING,
        )]
    findings = [Finding(
        "databricks_standard_access",
        "this notebook runs on a Databricks cluster in standard access mode, where training is not expected to work",
        (f"standard access mode: {where.access_mode_source}", f"on standard compute {sandbox}",
         f"standard compute offers no GPUs, no Databricks Runtime for ML and no FUSE for DBFS root or mounts "
         f"(/dbfs) ({STANDARD_COMPUTE})"),
        "use a cluster in dedicated (single user) access mode with a Databricks Runtime for ML; keep files in a Unity "
        "Catalog volume (/Volumes/<catalog>/<schema>/<volume>/...)",
        WARNING,
    )]
    if gpus_per_node:
        findings.append(Finding(
            "databricks_no_gpus",
            f"{gpus_per_node} GPU(s) per node were asked for, but Databricks standard access mode offers no GPUs",
            (f"standard access mode: {where.access_mode_source}",),
            "use a GPU cluster in dedicated (single user) access mode, or launch without GPUs",
        ))
    return findings


def slot_wait_finding(s: Snapshot, timeout: float) -> Finding:
    """Why a launch holds its barrier job back: fewer free slots than nodes, and what holds them
    (other applications, as the cluster manager tells; other jobs or runs of this application;
    executors still to come). Its cause names the first holder, so a new holder is a new finding."""
    held = (*s.holders, *(f"running in this application: {j}" for j in s.other_jobs))
    if held:
        why = held[0]
    elif s.awaiting_executors:
        why = "executors have not registered yet"
    else:
        why = "the slots are held by tasks of this application"
    return Finding(
        "waiting_for_slots",
        f"waiting for {s.requested_tasks} free task slots before submitting ({max(0, s.total_slots - s.busy_slots)} free now): {why}",
        (f"slots: {s.total_slots}, held by other jobs of this application: {s.busy_slots}", *held,
         *_executor_lines(s)),
        f"the run starts when the slots free, or fails after reservation_timeout ({timeout:.0f}s); to start sooner, "
        "stop the run or application that holds them, or ask for fewer nodes",
        WARNING,
    )


def _estimate_lines(s: Snapshot) -> tuple[str, ...]:
    if s.exact:
        return ()
    return ("slots and executors are estimates: a Spark Connect session shows no scheduler state, so they come "
            "from the session's conf and a probe job",)
