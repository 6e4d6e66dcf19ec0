"""Launches on local[2] / local[4] Spark: outcome, events, errors, stop, and the TFoS facade."""

from __future__ import annotations

import json
import re
import socket
import time
import types

import pytest
from databricks_shapes import AZURE, RaisingConf, on_databricks
from procs import child_processes, eventually

from tfos_notebook import InputMode, NodeError, PreflightError, Run, RunStopped, TFCluster
from tfos_notebook.runtime.driver.events import (
    ClusterReady,
    FindingRaised,
    LaunchSubmitted,
    Log,
    Registered,
    RunFinished,
    RunStateChanged,
    Step,
    TaskState,
)
from tfos_notebook.runtime.driver.spark import ClassicBackend


def echo(args, ctx):
    import os

    print(f"hello from {ctx.job_name}:{ctx.task_index}")
    ctx.report(3, loss=0.25)
    return {"role": ctx.job_name, "index": ctx.task_index, "args": args, "tf_config": os.environ["TF_CONFIG"]}


def test_run_returns_the_chief_value_and_streams_events(local_spark):
    run = Run(local_spark.sparkContext, echo, {"lr": 0.1}, 2).start()
    value = run.wait(120)
    assert value["role"] == "chief" and value["args"] == {"lr": 0.1}
    assert set(run.results) == {"chief:0", "worker:0"}
    assert run.state == "finished"
    kinds = [type(e) for e in run.events.events()]
    assert kinds[:2] == [RunStateChanged, LaunchSubmitted] and kinds[-1] is RunFinished
    assert len(run.events.events(Registered)) == 2 and len(run.events.events(ClusterReady)) == 1
    lines = {(e.role, e.line) for e in run.events.events(Log)}
    assert ("chief", "hello from chief:0") in lines and ("worker", "hello from worker:0") in lines
    assert {(e.role, e.step, e.metrics["loss"]) for e in run.events.events(Step)} == {
        ("chief", 3, 0.25), ("worker", 3, 0.25)}
    assert {e.state for e in run.events.events(TaskState)} == {"running", "finished"}


def reports_tensorflow(args, ctx):
    import sys
    import time

    ready = hasattr(sys.modules.get("tensorflow"), "constant")  # imported whole before this function began
    if args["import"]:
        t0 = time.monotonic()
        import tensorflow as tf

        return {"ready": ready, "import_secs": time.monotonic() - t0, "value": int(tf.constant(2) + 1)}
    return {"ready": ready}


def test_a_function_that_uses_tensorflow_finds_it_imported_while_its_cluster_formed(local_spark):
    sc = local_spark.sparkContext
    value = Run(sc, reports_tensorflow, {"import": True}, 2).start().wait(180)
    assert value["ready"] and value["value"] == 3 and value["import_secs"] < 0.5, value
    # turned off for a run: the function's own import is the first
    off = Run(sc, reports_tensorflow, {"import": False}, 2, env={"TFOS_PREIMPORT": ""}).start().wait(120)
    assert off == {"ready": False}


def fail_on_worker(args, ctx):
    import os
    import time

    if ctx.job_name == "worker":
        # fail once the chief is inside its function: on a loaded machine its process may still be
        # starting when the worker's error arrives, and then there is no stack of it to show
        deadline = time.monotonic() + 60
        while not os.path.exists(args["chief_started"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        raise ValueError("worker cannot load shard 7")
    open(args["chief_started"], "w").close()
    time.sleep(60)  # the chief would wait for the worker forever; the failure must stop it


def test_node_exception_surfaces_with_role_and_traceback_and_stops_the_rest(local_spark, tmp_path):
    sc = local_spark.sparkContext
    t0 = time.monotonic()
    run = Run(sc, fail_on_worker, {"chief_started": str(tmp_path / "chief-started")}, 2).start()
    with pytest.raises(NodeError) as info:
        run.wait(120)
    assert time.monotonic() - t0 < 40
    err = info.value
    assert (err.role, err.index, err.host) == ("worker", 0, f"{socket.gethostname()} (127.0.0.1)")
    assert "ValueError: worker cannot load shard 7" in str(err)
    assert 'in fail_on_worker' in err.traceback_text
    assert run.state == "failed"
    # where the chief was when the run failed: its Python stacks, written before it was stopped
    chief = [e.line for e in run.events.events(Log) if e.role == "chief"]
    assert any(line.startswith("Current thread 0x") for line in chief), chief
    assert any(re.search(r'line \d+ in fail_on_worker$', line) for line in chief), chief
    assert eventually(lambda: not child_processes(run.run_id))
    # the same SparkContext launches again
    again = Run(sc, echo, 1, 2).start()
    assert again.wait(120)["args"] == 1


class _ConfsRaise:
    """The local SparkContext, but every conf read raises ``[CONFIG_NOT_AVAILABLE]`` as on
    Databricks compute, except the keys of ``values``."""

    def __init__(self, sc, values: dict[str, str]) -> None:
        self._sc, self._values = sc, values

    def getConf(self):
        return types.SimpleNamespace(get=lambda key, default=None: RaisingConf(self._values)(key))

    def __getattr__(self, name):
        return getattr(self._sc, name)


def test_a_launch_on_databricks_standard_mode_is_warned_of_first_and_no_raising_conf_breaks_it(
        local_spark, monkeypatch, sqlite_tracking):
    # faked: Databricks (an Azure workspace's REPL context and runtime version), and a Spark whose conf
    # reads raise CONFIG_NOT_AVAILABLE for every key but the standard access mode tag; the launch is real.
    # On Databricks every run is tracked in MLflow: here in the test's own store, not ./mlflow.db.
    on_databricks(monkeypatch, "15.4", AZURE)
    backend = ClassicBackend(_ConfsRaise(local_spark.sparkContext,
                                         {"spark.databricks.clusterUsageTags.dataSecurityMode": "USER_ISOLATION"}))
    run = Run(backend, echo, None, 2).start()
    assert run.wait(120)["role"] == "chief"
    kinds = [type(e).__name__ for e in run.events.events()]
    warned = next(e for e in run.events.events(FindingRaised) if e.finding.code == "databricks_standard_access")
    assert kinds.index("FindingRaised") < kinds.index("LaunchSubmitted") and warned.finding.severity == "warning"
    assert warned.finding.cause == ("this notebook runs on a Databricks cluster in standard access mode, where "
                                    "training is not expected to work")


def sleeper(args, ctx):
    import time

    print("sleeping", flush=True)
    time.sleep(120)


def test_stop_kills_the_node_processes_and_keeps_the_context(local_spark):
    sc = local_spark.sparkContext
    run = Run(sc, sleeper, None, 2).start()
    assert run.events.wait_for(lambda evs: sum(isinstance(e, TaskState) and e.state == "running" for e in evs) == 2,
                               timeout=60)
    assert eventually(lambda: len(child_processes(run.run_id)) == 2)
    run.stop()
    assert run.state == "stopped"
    assert not [e for e in run.events.events(Log) if "most recent call first" in e.line]  # a stop asked for
    with pytest.raises(RunStopped):
        run.wait(1)
    assert eventually(lambda: not child_processes(run.run_id))
    assert sc.parallelize(range(10)).sum() == 45


def test_too_many_nodes_for_local_cores_fail_before_submitting(local_spark):
    t0 = time.monotonic()
    with pytest.raises(PreflightError, match="needs 3 task slots at once but the cluster has 2"):
        Run(local_spark.sparkContext, echo, None, 3).start()
    assert time.monotonic() - t0 < 30  # a ceiling: the point is before Spark's ten minutes of slot checks


def test_tfcluster_facade_runs_a_tfos_style_program(local_spark):
    cluster = TFCluster.run(local_spark.sparkContext, echo, ["--epochs", "1"], num_executors=2, num_ps=0,
                            input_mode=InputMode.TENSORFLOW, master_node="chief")
    assert set(cluster.cluster_spec) == {"chief", "worker"}
    assert cluster.shutdown()["args"] == ["--epochs", "1"]


def check_roles(args, ctx):
    import os

    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return {"job": ctx.job_name, "index": ctx.task_index, "spec": ctx.cluster_spec,
            "tf_config": json.loads(os.environ["TF_CONFIG"]),
            "resolved": resolver.cluster_spec().as_dict(), "task_type": resolver.task_type,
            "num_workers": ctx.num_workers}


def test_ps_chief_evaluator_worker_get_consistent_cluster_spec_and_tf_config(local_spark4):
    run = Run(local_spark4.sparkContext, check_roles, None, 4, num_ps=1, eval_node=True).start()
    run.background_grace_secs = 120  # let ps and evaluator return by themselves
    run.wait(180)
    results = run.results
    assert set(results) == {"ps:0", "chief:0", "evaluator:0", "worker:0"}
    spec = results["chief:0"]["spec"]
    assert {k: len(v) for k, v in spec.items()} == {"ps": 1, "chief": 1, "evaluator": 1, "worker": 1}
    for name, r in results.items():
        role, index = name.split(":")
        assert r["spec"] == spec
        assert r["tf_config"]["task"] == {"type": role, "index": int(index)}
        assert r["tf_config"]["cluster"] == {k: v for k, v in spec.items() if k != "evaluator"}
        assert r["task_type"] == role
        assert r["num_workers"] == 2
        assert r["resolved"]["ps"] == spec["ps"]




def ps_waits_forever(args, ctx):
    import time

    if ctx.job_name == "ps":
        time.sleep(600)  # stands for server.join()
    return ctx.job_name


def test_ps_nodes_are_stopped_once_the_training_nodes_finish(local_spark4):
    t0 = time.monotonic()
    run = Run(local_spark4.sparkContext, ps_waits_forever, None, 3, num_ps=1).start()
    assert run.wait(120) == "chief"
    assert time.monotonic() - t0 < 60
    assert run.state == "finished"
    assert set(run.results) == {"chief:0", "worker:0"}
    [ps_end] = [e for e in run.events.events(TaskState) if e.role == "ps" and e.state != "running"]
    assert ps_end.state == "finished" and ps_end.detail == "stopped after the training nodes finished"
    assert eventually(lambda: not child_processes(run.run_id))


def test_reservation_timeout_fails_with_findings_and_cleans_up(local_spark):
    from tfos_notebook import ReservationTimeout

    run = Run(local_spark.sparkContext, echo, None, 2, reservation_timeout=0.01).start()
    with pytest.raises(ReservationTimeout, match=r"waited 0s for 2 reservations") as info:
        run.wait(60)
    assert info.value.findings and "did not register" in info.value.findings[0].cause
    assert run.state == "failed"
    assert eventually(lambda: not child_processes(run.run_id))
    assert local_spark.sparkContext.parallelize(range(4)).count() == 4
