"""Pure parts of the runtime: role planning, TF_CONFIG, path resolution and diagnosis."""

from __future__ import annotations

import json

import pytest

from tfos_notebook.runtime import ConfigError, plan_roles
from tfos_notebook.runtime.driver.diagnosis.diagnose import (
    ExecutorInfo,
    Snapshot,
    diagnose,
    slot_wait_finding,
)
from tfos_notebook.runtime.driver.diagnosis.nodes import diagnose_failure
from tfos_notebook.runtime.driver.diagnosis.snapshot import EXECUTORS_SETTLE_SECS
from tfos_notebook.runtime.driver.events.finding import blockers
from tfos_notebook.runtime.node.child.ctx import NodeContext, absolute_path
from tfos_notebook.runtime.node.task.task import tf_config


def test_roles_are_assigned_ps_then_chief_then_evaluator_then_workers():
    assert plan_roles(5, num_ps=1, eval_node=True) == [
        ("ps", 0), ("chief", 0), ("evaluator", 0), ("worker", 0), ("worker", 1)]
    assert plan_roles(2) == [("chief", 0), ("worker", 0)]
    assert plan_roles(2, master_node=None) == [("worker", 0), ("worker", 1)]
    assert plan_roles(1) == [("chief", 0)]


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_nodes=0), "num_executors must be at least 1"),
    (dict(num_nodes=2, num_ps=2), "leave no node to train after 2 ps"),
    (dict(num_nodes=2, num_ps=1, eval_node=True), "leave no node to train after 1 ps and 1 evaluator"),
    (dict(num_nodes=2, num_ps=-1), "num_ps must be 0 or more"),
    (dict(num_nodes=2, master_node="boss"), "master_node must be 'chief', 'master' or None"),
])
def test_impossible_plans_are_refused_with_the_reason(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        plan_roles(**kwargs)


def test_tf_config_leaves_the_evaluator_out_of_the_cluster():
    spec = {"ps": ["h:1"], "chief": ["h:2"], "evaluator": ["h:3"], "worker": ["h:4"]}
    assert json.loads(tf_config(spec, "evaluator", 0)) == {
        "cluster": {"ps": ["h:1"], "chief": ["h:2"], "worker": ["h:4"]},
        "task": {"type": "evaluator", "index": 0}}


def test_ctx_counts_training_nodes_and_knows_the_chief():
    spec = {"ps": ["h:1"], "chief": ["h:2"], "evaluator": ["h:3"], "worker": ["h:4", "h:5"]}
    chief = NodeContext("r", 1, "chief", 0, spec)
    worker = NodeContext("r", 3, "worker", 0, spec)
    assert chief.num_workers == 3 and chief.is_chief and not worker.is_chief
    assert chief.worker_num == 1
    no_chief = NodeContext("r", 0, "worker", 0, {"worker": ["h:4", "h:5"]})
    assert no_chief.is_chief


@pytest.mark.parametrize("fs, path, expected", [
    ("hdfs://nn:8020", "hdfs://other/x", "hdfs://other/x"),
    ("hdfs://nn:8020", "dbfs:/runs/x", "dbfs:/runs/x"),
    ("hdfs://nn:8020", "/data/x", "hdfs://nn:8020/data/x"),
    ("file:///", "/data/x", "file:///data/x"),
    ("file:///", "rel/x", "file:///work/dir/rel/x"),
    ("dbfs:/", "/dbfs/runs/x", "/dbfs/runs/x"),
])
def test_absolute_path_follows_the_default_filesystem(fs, path, expected):
    assert absolute_path(fs, "/work/dir", path) == expected


def test_absolute_path_puts_relative_paths_in_the_hdfs_home(monkeypatch):
    monkeypatch.setattr("getpass.getuser", lambda: "ana")
    assert absolute_path("hdfs://nn:8020", "/w", "models/m") == "hdfs://nn:8020/user/ana/models/m"


TWO_EXECUTORS = (ExecutorInfo("0", "10.0.0.1", 1), ExecutorInfo("1", "10.0.0.2", 1))


def test_short_slots_name_the_count_and_the_fix():
    [f] = diagnose(Snapshot(3, roles=("chief:0", "worker:0", "worker:1"), total_slots=2, executors=TWO_EXECUTORS))
    assert f.code == "not_enough_slots"
    assert "needs 3 task slots at once but the cluster has 2" in f.cause
    assert "ask for at most 2 nodes" in f.remedy
    assert any("executor 1 on 10.0.0.2: 1 core(s)" in e for e in f.evidence)


def test_pending_executors_are_a_warning_not_a_verdict():
    [f] = diagnose(Snapshot(2, total_slots=1, executors=TWO_EXECUTORS[:1], expected_executors=2, elapsed=4))
    assert f.code == "executors_pending" and not blockers([f])
    assert "1 of 2 executors registered after 4s" in f.evidence[0]


def test_a_fresh_cluster_application_with_no_executor_yet_waits_rather_than_fails():
    # right after a session starts on a standalone master with no executor count set
    [f] = diagnose(Snapshot(2, total_slots=0, master="spark://10.0.0.1:7077", elapsed=1))
    assert f.code == "executors_pending" and not blockers([f])
    assert f.cause == "no executor has registered with the application yet"
    assert f.evidence[0] == "0 of an unknown number of executors registered after 1s"
    [local] = diagnose(Snapshot(2, total_slots=1, master="local[1]"))
    assert local.code == "not_enough_slots"  # local mode has all its slots from the start


def test_executors_a_standalone_master_started_are_waited_for_though_no_count_was_set():
    # TensorFlowOnSpark's programs launch right after making their SparkContext, often with no
    # executor count set: the master starts one executor per worker, and they register one by one
    def one_of(granted: int | None, age: float = 60.0, master: str = "spark://10.0.0.1:7077") -> list:
        return diagnose(Snapshot(2, total_slots=1, master=master, granted_cores=granted,
                                 executors=(ExecutorInfo("0", "10.0.0.1", 1, age=age),)))

    [starting] = one_of(2)
    assert starting.code == "executors_pending" and not blockers([starting])
    assert starting.cause == "executors with 1 core(s) the standalone master started for the application have not registered yet"
    for all_there in (1, None):  # every granted core registered, or a master that did not say
        [f] = one_of(all_there)
        assert f.code == "not_enough_slots" and blockers([f])
    # a master that did not say, an executor that registered moments ago: refused only once they settle
    [settling] = one_of(None, age=1.0)
    assert settling.code == "executors_pending" and not blockers([settling])
    assert settling.cause.startswith("executors may still be registering (one did moments ago")
    [settled] = one_of(None, age=EXECUTORS_SETTLE_SECS + 1)
    assert settled.code == "not_enough_slots" and blockers([settled])
    [unlisted] = diagnose(Snapshot(2, total_slots=1, master="spark://10.0.0.1:7077"))
    assert unlisted.code == "executors_pending"  # the scheduler counts a slot the status store does not list yet
    [told] = one_of(1, age=1.0)  # the master said every core it started is there
    assert told.code == "not_enough_slots"
    [local] = one_of(None, age=1.0, master="local[1]")
    assert local.code == "not_enough_slots"


def test_a_launch_waiting_for_slots_names_what_holds_them():
    held = Snapshot(2, total_slots=0, master="spark://10.0.0.1:7077", expected_executors=2,
                    holders=("application 'notebook-A' (app-1, user ann) holds 2 core(s)",))
    f = slot_wait_finding(held, 600)
    assert f.cause == ("waiting for 2 free task slots before submitting (0 free now): application 'notebook-A' "
                       "(app-1, user ann) holds 2 core(s)")
    assert f.severity == "warning" and "fails after reservation_timeout (600s)" in f.remedy
    busy = Snapshot(2, total_slots=2, busy_slots=2, executors=TWO_EXECUTORS,
                    other_jobs=("job 3 'tfos_notebook run a attempt 0' (2 running task(s), stages [3])",))
    assert slot_wait_finding(busy, 600).cause == (
        "waiting for 2 free task slots before submitting (0 free now): running in this application: job 3 "
        "'tfos_notebook run a attempt 0' (2 running task(s), stages [3])")


def test_slots_held_by_other_jobs_are_reported():
    [f] = diagnose(Snapshot(2, total_slots=2, busy_slots=1, executors=TWO_EXECUTORS,
                            other_jobs=("job 7 (1 running task(s), stages [9])",)))
    assert f.code == "slots_held_by_other_jobs"
    assert "running: job 7" in f.evidence[-1]


def test_dynamic_allocation_blocks_barrier_mode():
    codes = [f.code for f in diagnose(Snapshot(2, total_slots=4, dynamic_allocation=True))]
    assert codes == ["dynamic_allocation"]


def test_gpus_asked_but_not_configured():
    [f] = diagnose(Snapshot(2, total_slots=2, gpus_per_node=1))
    assert f.code == "gpus_not_configured"
    assert "spark.task.resource.gpu.amount=1" in f.remedy
    [f] = diagnose(Snapshot(2, total_slots=2, gpus_per_node=2, task_gpus=1, executor_gpus=2))
    assert f.code == "gpus_too_few" and "each task gets 1" in f.cause


def test_a_launch_that_fits_has_no_findings():
    assert diagnose(Snapshot(2, total_slots=2, executors=TWO_EXECUTORS, gpus_per_node=1, task_gpus=1)) == []


def test_event_stream_bounds_logs_and_steps_but_keeps_state_events():
    from tfos_notebook.runtime.driver.events import EventStream, Log, RunFinished, Step, TaskState

    stream = EventStream(max_logs=3, max_steps=4)
    seen = []
    stream.subscribe(seen.append)
    for i in range(10):
        stream.publish(Log("r", task=0, role="chief", index=0, stream="stdout", line=str(i)))
        stream.publish(Step("r", task=0, role="chief", index=0, step=i, metrics={"loss": 1.0}))
        stream.publish(TaskState("r", task=0, role="chief", index=0, state="running"))
    stream.publish(RunFinished("r", state="finished"))
    assert [e.line for e in stream.events(Log)] == ["7", "8", "9"]
    assert [e.step for e in stream.events(Step)] == [6, 7, 8, 9]
    assert len(stream.events(TaskState)) == 10 and len(seen) == 31
    assert stream.wait_for(lambda evs: isinstance(evs[-1], RunFinished), timeout=0)


def test_a_failed_export_names_both_ways_a_worker_misses_it():
    traceback_text = ('Traceback (most recent call last):\n  File "main.py", line 80, in main_fun\n'
                      "tfos_notebook.runtime.node.child.export.ExportError: the other workers did not join the model "
                      "export within 60s (DeadlineExceededError): under MultiWorkerMirroredStrategy every worker "
                      "must call ...\n")
    [finding] = diagnose_failure("worker", 0, "host-b", traceback_text)
    assert finding.code == "export_peer_missing" and finding.cause.startswith("worker:0 on host-b waited")
    assert "on every node" in finding.remedy and "ds.take(steps)" in finding.remedy
    [evidence] = finding.evidence
    assert evidence.startswith("worker:0 on host-b: ") and "ExportError: the other workers" in evidence
    assert diagnose_failure("worker", 0, "host-b", "ValueError: shard 7\n") == []
