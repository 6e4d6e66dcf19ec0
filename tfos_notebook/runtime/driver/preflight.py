"""Pre-flight: read the live cluster into a ``Snapshot`` and diagnose it before submitting.

Spark's own check for a barrier stage that needs more slots than exist retries every 15 s for
about 10 minutes and reports the reason only in the driver log; this answers in well under a
second once the executors are registered.

Every function takes the cluster's :class:`~.spark.SparkBackend`, or anything
:func:`~.spark.backend_for` accepts (a SparkContext, a classic SparkSession).
"""

from __future__ import annotations

from typing import Any

from ..wire.timeouts import Deadline
from .diagnose import Snapshot
from .spark import SparkBackend, backend_for

EXECUTOR_POLL_SECS = 0.25


def snapshot(backend: SparkBackend | Any, requested_tasks: int, roles: tuple[str, ...] = (),
             gpus_per_node: int = 0, elapsed: float = 0.0, own_group: str | None = None, **live: Any) -> Snapshot:
    """A ``Snapshot`` of the cluster now; ``own_group`` is the launch's tag (its tasks are not
    "other jobs"); ``live`` adds what a launch in progress knows (registered, stalled_for,
    task_errors, leftovers, versions, driver_versions)."""
    backend = backend_for(backend)
    view = backend.cluster(own_group)
    return Snapshot(
        requested_tasks=requested_tasks,
        roles=roles,
        total_slots=view.total_slots,
        busy_slots=view.busy_slots,
        other_jobs=view.other_jobs,
        executors=view.executors,
        expected_executors=view.expected_executors,
        dynamic_allocation=backend.conf("spark.dynamicAllocation.enabled", "false").lower() == "true",
        master=backend.master,
        task_gpus=float(backend.conf("spark.task.resource.gpu.amount", "0")),
        executor_gpus=int(float(backend.conf("spark.executor.resource.gpu.amount", "0"))),
        gpus_per_node=gpus_per_node,
        elapsed=elapsed,
        exact=view.exact,
        databricks=backend.databricks(),
        **live,
    )


def wait_for_executors(backend: SparkBackend | Any, requested_tasks: int, timeout: float) -> None:
    """Give executors that are still starting up to ``timeout`` seconds to register: until as many
    as the application asked for are there (at least one on a cluster manager when it asked for
    no number), or enough slots for ``requested_tasks``."""
    backend = backend_for(backend)

    def ready() -> bool:
        now = snapshot(backend, requested_tasks)
        return now.total_slots >= requested_tasks or not now.awaiting_executors

    Deadline(timeout).wait_until(ready, interval=EXECUTOR_POLL_SECS)
