"""Runs on a Spark Connect session: the gang as a barrier mapInArrow job, stop, a node's error."""

from __future__ import annotations

import time

import pytest

from tfos_notebook.runtime import NodeError, Run, RunStopped
from tfos_notebook.runtime.spark import ConnectBackend, backend_for


def node_value(args, ctx):
    return {"who": f"{ctx.job_name}:{ctx.task_index}", "n": len(ctx.cluster_spec["worker"]) + 1}


def test_a_connect_session_gets_the_connect_backend_and_runs_a_gang(connect_spark):
    backend = backend_for(connect_spark)
    assert isinstance(backend, ConnectBackend) and backend.master == "local[3]"
    view = backend.cluster()
    assert view.total_slots == 3 and not view.exact and view.executors
    run = Run(connect_spark, node_value, None, 2, reservation_timeout=120).start()
    assert run.wait(180) == {"who": "chief:0", "n": 2}
    assert run.results == {"chief:0": {"who": "chief:0", "n": 2}, "worker:0": {"who": "worker:0", "n": 2}}
