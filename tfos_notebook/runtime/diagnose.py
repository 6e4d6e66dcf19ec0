"""Why a launch cannot proceed: a pure function from a snapshot of the cluster to findings.

``diagnose(snapshot)`` looks at nothing but its argument, so every finding can be tested from a
hand-made snapshot without a cluster. ``snapshot_from_spark`` (in ``preflight``) fills a snapshot
from a live SparkContext.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .orphans import Leftover

BLOCKER = "blocker"
WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    """One diagnosis: a ``code`` for programs, the ``cause`` in words, the ``evidence`` it rests
    on, and the ``remedy``. A ``blocker`` means the launch cannot succeed as asked."""

    code: str
    cause: str
    evidence: tuple[str, ...]
    remedy: str
    severity: str = BLOCKER


@dataclass(frozen=True)
class ExecutorInfo:
    executor_id: str
    host: str
    cores: int = 0
    gpus: tuple[str, ...] = ()


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
        leftovers: processes of earlier runs still alive, and foreign processes holding GPUs.
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

    @property
    def executors_pending(self) -> int:
        if self.expected_executors is None:
            return 0
        return max(0, self.expected_executors - len(self.executors))


def _executor_lines(s: Snapshot) -> tuple[str, ...]:
    if not s.executors:
        return ("no executors are registered with the driver",)
    return tuple(
        f"executor {e.executor_id} on {e.host}: {e.cores} core(s)" + (f", GPUs {list(e.gpus)}" if e.gpus else "")
        for e in s.executors
    )


def diagnose(s: Snapshot) -> list[Finding]:
    """Every reason the launch described by ``s`` cannot start (or should worry the user)."""
    findings: list[Finding] = []
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
        pending = s.executors_pending
        if pending:
            findings.append(Finding(
                "executors_pending",
                f"{pending} executor(s) the application asked for have not registered yet",
                (f"{len(s.executors)} of {s.expected_executors} executors registered after {s.elapsed:.0f}s",
                 *_executor_lines(s)),
                "wait for the cluster manager to start them; if they never come, the cluster lacks free "
                "cores or memory for them (see the master's UI)",
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
                 *_executor_lines(s)),
                f"ask for at most {s.total_slots} nodes, or give the application more executors or cores "
                "(spark.executor.instances, spark.cores.max, spark.executor.cores)",
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
    findings += _leftover_findings(s)
    return findings


def _leftover_line(x: Leftover) -> str:
    gpu = f", holding GPU {','.join(x.gpus)} ({x.used_mib} MiB)" if x.gpus else ""
    who = f"run {x.run_id} {x.task}".rstrip() if x.run_id else "not started by tfos_notebook"
    return f"{x.host} pid {x.pid} ({who}){gpu}: {x.cmdline}"


def _leftover_findings(s: Snapshot) -> list[Finding]:
    findings = []
    ours = [x for x in s.leftovers if not x.foreign and not x.killed]
    if ours:
        on_gpu = [x for x in ours if x.gpus]
        findings.append(Finding(
            "orphan_processes",
            f"{len(ours)} process(es) of earlier runs are still alive"
            + (f", {len(on_gpu)} of them holding GPU memory" if on_gpu else ""),
            tuple(_leftover_line(x) for x in ours),
            "kill them with %tfos_cleanup --kill (or tfos_notebook.cleanup(sc, kill=True)), or the Kill "
            "leftovers button in the monitor",
            BLOCKER if on_gpu and s.gpus_per_node else WARNING,
        ))
    foreign = [x for x in s.leftovers if x.foreign]
    if foreign:
        findings.append(Finding(
            "gpu_held_by_foreign_process",
            f"{len(foreign)} process(es) not started by tfos_notebook hold GPU memory on the executors",
            tuple(_leftover_line(x) for x in foreign),
            "they may belong to another job or user; stop them, or give this run other GPUs (Spark's "
            "discovery script decides which addresses executors offer)",
            WARNING,
        ))
    return findings


def blockers(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == BLOCKER]
