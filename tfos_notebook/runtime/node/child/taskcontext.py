"""Spark's task context, carried from a node's barrier task into the child process that runs the
user's function, so that ``BarrierTaskContext.get()`` answers there as it would in the task itself
(``partitionId()``, ``resources()``, ``getTaskInfos()``, ``allGather()``, ``barrier()``).

The child calls the executor's barrier server directly, with the task's connection details and
secret; the node itself never calls it, so the child's calls are the task's only ones. pyspark
builds its context objects only inside its own worker, so both ends copy the object's state (its
attributes, and the barrier server's address and secret that ``BarrierTaskContext._initialize``
takes): this is pyspark's internal layout, the same in pyspark 3.5 and 4.x.

The state is plain data, and the child installs it only when the function imports pyspark (most
never do): the child itself stays free of pyspark's imports.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from .afterimport import after_import

MODULE = "pyspark.taskcontext"


def capture() -> dict[str, Any] | None:
    """The current Spark task's context as plain picklable state (None outside a Spark task)."""
    from pyspark import BarrierTaskContext, TaskContext

    context = TaskContext.get()
    if context is None:
        return None
    attrs = dict(vars(context))
    resources = attrs.pop("_resources", None) or {}
    state: dict[str, Any] = {"attrs": attrs, "barrier": None,
                             "resources": {name: list(info.addresses) for name, info in resources.items()}}
    if isinstance(context, BarrierTaskContext):
        conn = getattr(context, "_conn_info", None)
        if conn is None:
            conn = getattr(context, "_port", None)  # pyspark 3.5's name for it
        state["barrier"] = (conn, context._secret)
    return state


def install_on_import(state: dict[str, Any] | None) -> None:
    """Make ``state`` (from :func:`capture` in the task) this process's task context: now if pyspark
    is loaded, else as soon as it is."""
    if state is not None:
        after_import(MODULE, partial(_install, state=state))


def _install(module: Any, state: dict[str, Any]) -> None:
    barrier = state["barrier"] is not None
    context = object.__new__(module.BarrierTaskContext if barrier else module.TaskContext)
    vars(context).update(state["attrs"])
    context._resources = {name: module.ResourceInformation(name, addresses)
                          for name, addresses in state["resources"].items()}
    # TaskContext.get() and BarrierTaskContext.get() answer it; a child forked from the worker
    # inherits the worker's own context, which BarrierTaskContext keeps apart from TaskContext's
    for kind in (module.TaskContext, module.BarrierTaskContext):
        kind._setTaskContext(context)
    if barrier:
        module.BarrierTaskContext._initialize(*state["barrier"])
