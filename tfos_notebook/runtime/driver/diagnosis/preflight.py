"""Pre-flight: read the live cluster into a ``Snapshot`` and diagnose it before submitting.

Spark's own check for a barrier stage that needs more slots than exist retries every 15 s for
about 10 minutes and reports the reason only in the driver log; this answers in well under a
second once the executors are registered.

Every function takes the cluster's :class:`~.spark.SparkBackend`, or anything
:func:`~.spark.backend_for` accepts (a SparkContext, a classic SparkSession).
"""

from __future__ import annotations

from typing import Any

from ...host.timeouts import Deadline
from ..errors import ConfigError
from ..spark import SparkBackend, backend_for
from .diagnose import Snapshot

EXECUTOR_POLL_SECS = 0.25
#: Spark settings by which a cluster asks for encrypted traffic.
ENCRYPTION_CONFS = ("spark.ssl.enabled", "spark.ssl.rpc.enabled", "spark.network.crypto.enabled")
#: spark-tensorflow-distributor's setting that accepts TensorFlow's unencrypted traffic there.
IGNORE_SSL_CONF = "tensorflow.spark.distributor.ignoreSsl"


def conf_flag(backend: SparkBackend, key: str) -> bool:
    """A boolean Spark setting (``true``/``false`` in any case; unset is false).

    Raises:
        ConfigError: the value is neither."""
    value = (backend.conf(key) or "false").strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"{key}={backend.conf(key)!r}: set it to true or false")
    return value == "true"


def security(backend: SparkBackend) -> dict[str, Any]:
    """The cluster's demand for encryption and the override, as ``Snapshot`` fields."""
    return {"encryption": encryption_demand(backend), "ignore_ssl": conf_flag(backend, IGNORE_SSL_CONF)}


def encryption_demand(backend: SparkBackend | Any) -> str:
    """The setting by which the cluster asks for encrypted traffic (``"spark.ssl.enabled=true"``),
    or "" when it does not: the run's channels then need TLS."""
    backend = backend_for(backend)
    return next((f"{key}=true" for key in ENCRYPTION_CONFS if conf_flag(backend, key)), "")


def snapshot(backend: SparkBackend | Any, requested_tasks: int, roles: tuple[str, ...] = (),
             gpus_per_node: int = 0, elapsed: float = 0.0, own_group: str | None = None, **live: Any) -> Snapshot:
    """A ``Snapshot`` of the cluster now; ``own_group`` is the launch's tag (its tasks are not
    "other jobs"); ``live`` adds what a launch in progress knows (registered, stalled_for,
    task_errors, leftovers, versions, driver_versions, and encryption / ignore_ssl once read)."""
    backend = backend_for(backend)
    view = backend.cluster(own_group)
    if "encryption" not in live:
        live.update(security(backend))
    return Snapshot(
        requested_tasks=requested_tasks,
        roles=roles,
        total_slots=view.total_slots,
        busy_slots=view.busy_slots,
        other_jobs=view.other_jobs,
        executors=view.executors,
        expected_executors=view.expected_executors,
        # with no executor count set, a standalone master tells how many cores it is starting for us
        granted_cores=(backend.granted_cores() if view.expected_executors is None
                       and view.total_slots < requested_tasks else None),
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


def wait_for_executors(backend: SparkBackend | Any, requested_tasks: int, timeout: float) -> int:
    """Give executors that are still starting up to ``timeout`` seconds to register: until as many
    as the application asked for are there (at least one on a cluster manager when it asked for
    no number), or enough slots for ``requested_tasks``. Returns the cluster's slots then."""
    backend = backend_for(backend)
    slots = 0

    def ready() -> bool:
        nonlocal slots
        now = snapshot(backend, requested_tasks)
        slots = now.total_slots
        return slots >= requested_tasks or not now.awaiting_executors

    Deadline(timeout).wait_until(ready, interval=EXECUTOR_POLL_SECS)
    return slots
