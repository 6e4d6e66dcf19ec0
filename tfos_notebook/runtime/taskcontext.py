"""Spark's task context, carried from a node's barrier task into the child process that runs the
user's function, so that ``BarrierTaskContext.get()`` answers there as it would in the task itself
(``partitionId()``, ``resources()``, ``getTaskInfos()``, ``allGather()``, ``barrier()``).

The child calls the executor's barrier server directly, with the task's connection details and
secret; the node itself never calls it, so the child's calls are the task's only ones. pyspark
builds its context objects only inside its own worker, so both ends copy the object's state (its
attributes, and the barrier server's address and secret that ``BarrierTaskContext._initialize``
takes): this is pyspark's internal layout, the same in pyspark 3.5 and 4.x.
"""

from __future__ import annotations

from typing import Any


def capture() -> dict[str, Any] | None:
    """The current Spark task's context as picklable state (None outside a Spark task)."""
    from pyspark import BarrierTaskContext, TaskContext

    context = TaskContext.get()
    if context is None:
        return None
    state: dict[str, Any] = {"attrs": dict(vars(context)), "barrier": None}
    if isinstance(context, BarrierTaskContext):
        conn = getattr(context, "_conn_info", None)
        if conn is None:
            conn = getattr(context, "_port", None)  # pyspark 3.5's name for it
        state["barrier"] = (conn, context._secret)
    return state


def install(state: dict[str, Any] | None) -> None:
    """Make ``state`` (from :func:`capture` in the task) this process's task context."""
    if state is None:
        return
    from pyspark import BarrierTaskContext, TaskContext

    context = object.__new__(TaskContext if state["barrier"] is None else BarrierTaskContext)
    vars(context).update(state["attrs"])
    TaskContext._setTaskContext(context)  # TaskContext.get() and BarrierTaskContext.get() both answer it
    if state["barrier"] is not None:
        BarrierTaskContext._initialize(*state["barrier"])
