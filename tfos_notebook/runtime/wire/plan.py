"""The task closure: what the driver ships to each barrier task, and the node code it runs there.

``NodePlan`` is plain data and the barrier task's body: Spark pickles it, and on the executor it
imports the node's code by name (``NODE_CODE``), so that the driver's process never loads the
node's modules and the node's modules never import the driver's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .channel import Secret
    from .feed.stage import InStage

#: The node's process imports these modules (comma-separated) while its cluster forms (``NodePlan.preimport``).
PREIMPORT_ENV = "TFOS_PREIMPORT"
#: What a fed node's child imports to serve its data feed (pyarrow, numpy): first on its import
#: thread, so that its main thread never imports numpy while TensorFlow's import does (node/child/main.py).
FEED_SERVER_MODULE = "tfos_notebook.runtime.node.child.feed.server"
#: The node's process: ``python -m CHILD_MODULE STATUS_FD NODE_PID RUN_ID TASK PORT_FD ORDERS_FD NAME
#: ATTEMPT`` (``node/child/main.py``) when spawned; forked, it runs the same ``main`` with those arguments
#: (``node/task/forked.py``).
CHILD_MODULE = "tfos_notebook.runtime.node.child.main"
#: The roles that train (and, with InputMode.SPARK, are fed); ps and evaluator run beside them.
FOREGROUND_ROLES = ("chief", "master", "worker")


def node_name(role: str, index: int) -> str:
    """A node's name wherever the project shows or records one: ``role:index`` (``worker:1``)."""
    return f"{role}:{index}"


def chief_of(roles: list[tuple[str, int]]) -> tuple[str, int]:
    """The node that saves models and whose metrics are the run's: the chief (or master), else
    worker 0, as TensorFlow's strategies choose it."""
    for role, index in roles:
        if role in ("chief", "master"):
            return role, index
    return "worker", 0


#: What a barrier task runs, by module: ``run_node`` (``SparkBackend.barrier``) or, over its
#: partition of the run's data, ``run_fed_node`` (``SparkBackend.barrier_over``).
NODE_CODE = {"run_node": "tfos_notebook.runtime.node.task.task",
             "run_fed_node": "tfos_notebook.runtime.node.task.feed.fednode"}


@dataclass
class NodePlan:
    """Everything a node needs, shipped to the executors in the task closure (pickled by Spark)."""

    run_id: str
    server_host: str
    server_port: int
    secret: Secret
    main_fun: Any
    args: Any
    roles: list[tuple[str, int]]
    default_fs: str
    working_dir: str
    model_dir: str | None = None
    model_dir_probe: str | None = None  # the driver's probe file in a local model dir (driver/run/storage.py)
    log_dir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    legacy_keras: bool | None = None
    attempt: int = 0
    stop_grace_secs: float = 5.0
    feed_buffer_bytes: int = 0  # > 0: InputMode.SPARK, chief and workers serve a data feed this big
    release_port: bool = True  # False: the function gets the reserved port's socket (ctx.tmp_socket)
    instage: InStage | None = None  # each node's own task feeds it its partition
    gpu_counts: tuple[int, ...] = ()  # by task: how many of its task's GPUs each node uses (empty: all)
    mlflow: bool = False  # the run is logged to MLflow: nodes relay their MLflow calls, sample CPU and memory
    memory_limit_mb: float = 0.0  # > 0: each node's memory guard stops its process past this resident memory
    preimport: tuple[str, ...] = ()  # modules each node's process imports while the cluster forms (driver/run/preimport.py)

    def __call__(self, task: int, gpus: list[str]) -> dict:  # the barrier task's body (SparkBackend.barrier)
        return node_code("run_node")(self, task, gpus)

    def serves_feed(self, task: int) -> bool:
        """Whether ``task``'s node serves a data feed (InputMode.SPARK, a training role)."""
        return bool(self.feed_buffer_bytes) and self.roles[task][0] in FOREGROUND_ROLES

    def fed(self, task: int, gpus: list[str], items: Iterator) -> Iterator:
        """The barrier task's body over data (``SparkBackend.barrier_over``): the node, fed its partition."""
        return node_code("run_fed_node")(self, task, gpus, items)


def node_code(name: str) -> Callable:
    """The node's function ``name`` (a key of ``NODE_CODE``), imported where the task runs."""
    return getattr(importlib.import_module(NODE_CODE[name]), name)
