"""What a diagnosis looks at (see ``diagnose.py``): a snapshot of the cluster and the launch at
one moment, filled from a live cluster by ``preflight.snapshot`` or by hand in tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...host.orphans import Leftover
from ..spark.backend import ExecutorInfo
from ..spark.databricks import DatabricksContext

#: Seconds after an executor registered during which a launch short of slots is not yet refused on a
#: standalone master that set no executor count and could not be asked how many it started.
EXECUTORS_SETTLE_SECS = 5.0


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
        granted_cores: with no executor count set, the cores a standalone master granted the
            application, its executors registered or still starting (None when unknown).
        dynamic_allocation: whether ``spark.dynamicAllocation.enabled`` is true.
        master: the Spark master URL.
        task_gpus: ``spark.task.resource.gpu.amount`` (0 when unset).
        executor_gpus: ``spark.executor.resource.gpu.amount`` (0 when unset).
        gpus_per_node: GPUs the user asked for per node (0 for CPU-only).
        encryption: the setting by which the cluster asks for encrypted traffic
            (``spark.ssl.enabled=true``...), "" when it does not.
        ignore_ssl: ``tensorflow.spark.distributor.ignoreSsl=true``: TensorFlow's own traffic between
            nodes may go unencrypted there.
        nodes_talk: the nodes form one TensorFlow cluster and exchange tensors (False for
            independent copies, as ``TFParallel`` runs).
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
    granted_cores: int | None = None
    dynamic_allocation: bool = False
    master: str = ""
    task_gpus: float = 0
    executor_gpus: int = 0
    gpus_per_node: int = 0
    encryption: str = ""
    ignore_ssl: bool = False
    nodes_talk: bool = True
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
    def cores_pending(self) -> int:
        """Cores a standalone master granted the application in executors not registered yet."""
        if self.granted_cores is None:
            return 0
        return max(0, self.granted_cores - sum(e.cores for e in self.executors))

    @property
    def executors_settling(self) -> bool:
        """On a standalone master, with no executor count set and the master's count of cores
        unknown (its UI not at ``spark.master.ui.port``), an executor registered less than
        ``EXECUTORS_SETTLE_SECS`` ago (or so recently that Spark's status store, which lists the
        executors, has not caught up with its scheduler, which counts their slots): a fresh
        application's executors register one by one, so a launch short of slots is refused only once
        they have settled."""
        if (self.expected_executors is not None or self.granted_cores is not None or not self.exact
                or not self.master.startswith("spark://")):
            return False
        ages = [e.age for e in self.executors if e.age is not None]
        return (self.total_slots > 0 and not self.executors) or (bool(ages) and min(ages) < EXECUTORS_SETTLE_SECS)

    @property
    def awaiting_executors(self) -> bool:
        """Executors may still come: some the application asked for are missing, or (with no
        executor count set) some a standalone master started for it (``cores_pending``: a fresh
        application's executors register one by one), or none has registered and there is no slot
        at all, as right after a session starts on a cluster manager (local mode always has its
        slots)."""
        return bool(self.executors_pending) or bool(self.cores_pending) or (
            self.expected_executors is None and not self.executors and not self.total_slots and self.exact)

    @property
    def slots_may_come(self) -> bool:
        """Whether a launch short of slots waits rather than being refused: executors are awaited,
        or still settling."""
        return self.awaiting_executors or self.executors_settling


def executor_lines(s: Snapshot) -> tuple[str, ...]:
    """One evidence line per registered executor."""
    if not s.executors:
        return ("no executors are registered with the driver",)
    return tuple(
        f"executor {e.executor_id} on {e.host}: {e.cores} core(s)" + (f", GPUs {list(e.gpus)}" if e.gpus else "")
        for e in s.executors
    )
