"""Why a launch cannot proceed: a pure function from a snapshot of the cluster to findings.

``diagnose(snapshot)`` looks at nothing but its argument, so every finding can be tested from a
hand-made snapshot (``snapshot.py``) without a cluster. ``preflight.snapshot`` fills a snapshot from a live cluster
through its Spark backend. Each kind of finding is a small rule, listed in ``RULES``. Findings
about what the nodes report are in ``nodes.py``, about Databricks compute in
``databricks.py``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..events.finding import BLOCKER, WARNING, Finding, blockers, tail
from .databricks import compute_findings
from .nodes import leftover_findings, version_findings
from .snapshot import ExecutorInfo, Snapshot, executor_lines

__all__ = ["RULES", "ExecutorInfo", "Rule", "Snapshot", "diagnose", "slot_wait_finding"]


#: A rule: the findings of one kind in a snapshot, given what the rules before it found.
Rule = Callable[[Snapshot, list[Finding]], list[Finding]]


def _databricks_compute(s: Snapshot, _: list[Finding]) -> list[Finding]:
    return compute_findings(s.databricks, s.gpus_per_node)


def _dynamic_allocation(s: Snapshot, _: list[Finding]) -> list[Finding]:
    if not s.dynamic_allocation:
        return []
    return [Finding(
        code="dynamic_allocation",
        cause="dynamic allocation is on, and Spark refuses barrier-mode stages with it",
        evidence=("spark.dynamicAllocation.enabled=true",),
        remedy="start the session with spark.dynamicAllocation.enabled=false and a fixed number of "
               "executors (spark.executor.instances, or spark.cores.max on standalone)",
    )]


def _gpus_per_task(s: Snapshot, _: list[Finding]) -> list[Finding]:
    if not s.gpus_per_node or s.task_gpus >= s.gpus_per_node:
        return []
    if not s.task_gpus:
        return [Finding(
            code="gpus_not_configured",
            cause=f"{s.gpus_per_node} GPU(s) per node were asked for, but Spark assigns no GPUs to tasks",
            evidence=("spark.task.resource.gpu.amount is not set",
                      f"spark.executor.resource.gpu.amount={s.executor_gpus}"),
            remedy=f"set spark.executor.resource.gpu.amount and spark.task.resource.gpu.amount={s.gpus_per_node} "
                   "(with a GPU discovery script on the workers), or launch without GPUs",
        )]
    return [Finding(
        code="gpus_too_few",
        cause=f"{s.gpus_per_node} GPU(s) per node were asked for, but each task gets {s.task_gpus:g}",
        evidence=(f"spark.task.resource.gpu.amount={s.task_gpus:g}",),
        remedy=f"set spark.task.resource.gpu.amount={s.gpus_per_node}, or ask for {s.task_gpus:g} GPU(s) per node",
    )]


def _executors_pending(s: Snapshot, _: list[Finding]) -> list[Finding]:
    if s.requested_tasks <= s.total_slots or not s.slots_may_come:
        return []
    pending = s.executors_pending
    return [Finding(
        code="executors_pending",
        cause=f"{pending} executor(s) the application asked for have not registered yet" if pending
              else f"executors with {s.cores_pending} core(s) the standalone master started for the application "
                   "have not registered yet" if s.cores_pending
              else "executors may still be registering (one did moments ago; the application set no "
                   "executor count and the standalone master's UI did not say how many it started)"
              if s.executors_settling
              else "no executor has registered with the application yet",
        evidence=(f"{len(s.executors)} of {s.expected_executors or 'an unknown number of'} executors registered "
                  f"after {s.elapsed:.0f}s", *executor_lines(s)),
        remedy="nothing to do if they are starting: the launch waits for them (up to reservation_timeout); if "
               "they never come, the cluster lacks free cores or memory for them (see the master's UI)",
        severity=WARNING,
    )]


def _not_enough_slots(s: Snapshot, _: list[Finding]) -> list[Finding]:
    if s.requested_tasks <= s.total_slots or s.slots_may_come:
        return []
    roles = f" ({', '.join(s.roles)})" if s.roles else ""
    return [Finding(
        code="not_enough_slots",
        cause=f"the launch needs {s.requested_tasks} task slots at once but the cluster has {s.total_slots}",
        evidence=(f"requested {s.requested_tasks} nodes{roles}",
                  f"slots for this resource profile: {s.total_slots} (executors x cores per executor / "
                  "spark.task.cpus, and GPUs per executor / spark.task.resource.gpu.amount)",
                  *_estimate_lines(s), *executor_lines(s)),
        remedy=f"ask for at most {s.total_slots} nodes, or give the application more executors or cores "
               "(spark.executor.instances, spark.cores.max, spark.executor.cores)",
        severity=BLOCKER if s.exact else WARNING,  # an estimate cannot prove the launch impossible
        estimated=not s.exact,
    )]


def _slots_held_by_other_jobs(s: Snapshot, _: list[Finding]) -> list[Finding]:
    if not s.busy_slots or not s.total_slots - s.busy_slots < s.requested_tasks <= s.total_slots:
        return []
    return [Finding(
        code="slots_held_by_other_jobs",
        cause=f"{s.busy_slots} of {s.total_slots} slots are held by other running jobs, so the launch "
              "waits until they finish",
        evidence=(f"requested {s.requested_tasks} nodes, free slots now {s.total_slots - s.busy_slots}",
                  *(f"running: {j}" for j in s.other_jobs)),
        remedy="wait for those jobs, cancel them (sc.cancelJobGroup / the Spark UI), or ask for fewer nodes",
        severity=WARNING,
    )]


def _tensorflow_traffic(s: Snapshot, _: list[Finding]) -> list[Finding]:
    return [_unencrypted_tensorflow(s)] if s.encryption and s.nodes_talk and s.requested_tasks > 1 else []


def _leftovers(s: Snapshot, _: list[Finding]) -> list[Finding]:
    return leftover_findings(s.leftovers, s.gpus_per_node)


def _versions(s: Snapshot, _: list[Finding]) -> list[Finding]:
    return version_findings(s.versions, s.driver_versions)


def _crashed_before_registering(s: Snapshot, _: list[Finding]) -> list[Finding]:
    if not s.task_errors:
        return []
    return [Finding(
        code="node_crashed_before_registering",
        cause=f"{len(s.task_errors)} Spark task attempt(s) of the launch failed before their node registered",
        evidence=tuple(tail(e) for e in s.task_errors[-3:]),
        remedy="read the error above; a ModuleNotFoundError usually means tfos_notebook or its dependencies are "
               "not installed on the executors (install them as a cluster library)",
    )]


def _gang_not_started(s: Snapshot, found: list[Finding]) -> list[Finding]:
    if s.exact or s.registered or not s.stalled_for or blockers(found):
        return []
    return [Finding(
        code="gang_not_started",
        cause=f"none of the {s.requested_tasks} nodes has started after {s.stalled_for:.0f}s: Spark has not "
              "scheduled the gang, which needs all its slots free at once",
        evidence=(f"requested {s.requested_tasks} nodes; slots (estimated): {s.total_slots}", *_estimate_lines(s),
                  *executor_lines(s)),
        remedy="not enough free slots (other jobs hold some, or the cluster has fewer than estimated), or dynamic "
               "allocation is on: stop the run, then free slots, ask for fewer nodes, or turn dynamic allocation "
               "off; Spark itself gives up only after spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures "
               "tries (about 10 minutes)",
        severity=WARNING,
        estimated=True,
    )]


def _registration_stalled(s: Snapshot, found: list[Finding]) -> list[Finding]:
    if not s.registered or len(s.registered) >= s.requested_tasks or not s.stalled_for or blockers(found):
        return []
    missing = [r for r in s.roles if r not in s.registered]
    return [Finding(
        code="registration_stalled",
        cause=f"{len(s.registered)} of {s.requested_tasks} nodes registered; none for {s.stalled_for:.0f}s",
        evidence=(f"registered: {', '.join(s.registered)}", f"missing: {', '.join(missing)}", *executor_lines(s)),
        remedy="the missing nodes' tasks have not started: check the Spark UI for pending tasks and the "
               "executors' stderr; other jobs or a lost executor can hold their slots",
        severity=WARNING,
    )]


#: Every rule, in the order their findings are listed. The last two speak only when no blocker
#: explains the wait already.
RULES: tuple[Rule, ...] = (
    _databricks_compute, _dynamic_allocation, _gpus_per_task, _executors_pending, _not_enough_slots,
    _slots_held_by_other_jobs, _tensorflow_traffic, _leftovers, _versions, _crashed_before_registering,
    _gang_not_started, _registration_stalled,
)


def diagnose(s: Snapshot) -> list[Finding]:
    """Every reason the launch described by ``s`` cannot start (or should worry the user): the
    findings of each rule in ``RULES``, in order."""
    findings: list[Finding] = []
    for rule in RULES:
        findings += rule(s, findings)
    return findings


def _unencrypted_tensorflow(s: Snapshot) -> Finding:
    evidence = (s.encryption, f"{s.requested_tasks} nodes exchange gradients and variables over TensorFlow's gRPC, "
                "which has no encryption", "tfos_notebook's own control and data channels are encrypted (TLS)")
    if s.ignore_ssl:
        return Finding(
            code="tensorflow_traffic_unencrypted",
            cause=f"TensorFlow's traffic between the {s.requested_tasks} nodes is not encrypted, on a cluster that "
                  "asks for encryption (tensorflow.spark.distributor.ignoreSsl=true allows it)",
            evidence=evidence, remedy="train on one node to keep every byte encrypted", severity=WARNING)
    return Finding(
        code="tensorflow_traffic_unencrypted",
        cause=f"the cluster asks for encrypted traffic, but TensorFlow's traffic between the {s.requested_tasks} "
              "nodes cannot be encrypted",
        evidence=evidence,
        remedy="train on one node (one Spark task, with all its GPUs), or accept unencrypted TensorFlow traffic "
               "between the nodes: set tensorflow.spark.distributor.ignoreSsl=true in the Spark conf")


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
        code="waiting_for_slots",
        cause=f"waiting for {s.requested_tasks} free task slots before submitting "
              f"({max(0, s.total_slots - s.busy_slots)} free now): {why}",
        evidence=(f"slots: {s.total_slots}, held by other jobs of this application: {s.busy_slots}", *held,
                  *executor_lines(s)),
        remedy=f"the run starts when the slots free, or fails after reservation_timeout ({timeout:.0f}s); to start "
               "sooner, stop the run or application that holds them, or ask for fewer nodes",
        severity=WARNING,
    )


def _estimate_lines(s: Snapshot) -> tuple[str, ...]:
    if s.exact:
        return ()
    return ("slots and executors are estimates: a Spark Connect session shows no scheduler state, so they come "
            "from the session's conf and a probe job",)
