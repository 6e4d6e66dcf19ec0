"""The task's Spark context in a node's child process (runtime/node/child/taskcontext.py), installed
only when the function imports pyspark. In a fresh interpreter, with the state a barrier task
would carry (the runs that use it against real Spark are in tests/peers/test_distributor*.py)."""

from __future__ import annotations

import subprocess
import sys

STATE = {"attrs": {"_stageId": 3, "_partitionId": 1, "_attemptNumber": 0, "_taskAttemptId": 7, "_cpus": 1,
                   "_localProperties": {"addresses": "10.0.0.1:4040,10.0.0.2:4040"}},
         "resources": {"gpu": ["2", "3"]}, "barrier": (40123, "s3cret")}


def run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_the_context_arrives_when_the_function_imports_pyspark_and_not_before():
    out = run(f"""
import sys
from tfos_notebook.runtime.node.child import taskcontext
taskcontext.install_on_import({STATE!r})
print("pyspark" in sys.modules)
from pyspark import BarrierTaskContext, TaskContext
c = BarrierTaskContext.get()
print(c is TaskContext.get(), c.partitionId(), c.stageId(), c.resources()["gpu"].addresses,
      [i.address for i in c.getTaskInfos()], BarrierTaskContext._conn_info or BarrierTaskContext._port)
""")
    assert out.splitlines() == ["False", "True 1 3 ['2', '3'] ['10.0.0.1:4040', '10.0.0.2:4040'] 40123"]


def test_a_context_for_an_already_loaded_pyspark_is_installed_at_once():
    out = run(f"""
import pyspark
from tfos_notebook.runtime.node.child import taskcontext
taskcontext.install_on_import({STATE!r})
print(pyspark.TaskContext.get().partitionId())
""")
    assert out == "1"


def test_a_child_forked_from_a_worker_that_ran_a_barrier_task_answers_with_its_own_context():
    """The worker's last barrier task left its own context on ``BarrierTaskContext``, apart from
    ``TaskContext``'s; a child forked from it inherits that one, which must not answer for the task."""
    out = run(f"""
from pyspark import BarrierTaskContext, TaskContext
stale = object.__new__(BarrierTaskContext)
BarrierTaskContext._taskContext = stale  # what BarrierTaskContext._getOrCreate() leaves in the worker
from tfos_notebook.runtime.node.child import taskcontext
taskcontext.install_on_import({STATE!r})
c = BarrierTaskContext.get()
print(c is not stale, c is TaskContext.get(), c.partitionId())
""")
    assert out == "True True 1"
