"""Runs on a Spark Connect session: the gang as a barrier mapInArrow job, stop, a node's error."""

from __future__ import annotations

import time

import pytest

from tfos_notebook.runtime import NodeError, Run, RunStopped
from tfos_notebook.runtime.driver.spark import ConnectBackend, backend_for


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


def fail_on_worker(args, ctx):
    if ctx.job_name == "worker":
        raise ValueError("worker cannot load shard 7")
    import time

    time.sleep(60)


def test_a_node_exception_surfaces_with_its_traceback_and_the_session_survives(connect_spark):
    from nbhelpers import child_processes, wait_until

    t0 = time.monotonic()
    run = Run(connect_spark, fail_on_worker, None, 2).start()
    with pytest.raises(NodeError) as info:
        run.wait(120)
    assert time.monotonic() - t0 < 40
    err = info.value
    assert (err.role, err.index) == ("worker", 0)
    assert "ValueError: worker cannot load shard 7" in str(err) and "in fail_on_worker" in err.traceback_text
    assert run.state == "failed"
    assert wait_until(lambda: not child_processes(run.run_id), 30)
    assert connect_spark.range(10).count() == 10


def sleeper(args, ctx):
    import time

    print("sleeping", flush=True)
    time.sleep(120)


def test_stop_ends_the_nodes_and_the_session_goes_on(connect_spark):
    from nbhelpers import child_processes, wait_until

    from tfos_notebook.runtime.driver.events import TaskState

    run = Run(connect_spark, sleeper, None, 2).start()
    assert run.events.wait_for(lambda evs: sum(isinstance(e, TaskState) and e.state == "running" for e in evs) == 2,
                               timeout=60)
    t0 = time.monotonic()
    run.stop()
    assert run.state == "stopped" and time.monotonic() - t0 < 15
    with pytest.raises(RunStopped):
        run.wait(1)
    assert wait_until(lambda: not child_processes(run.run_id), 30)
    assert connect_spark.range(10).count() == 10


def hold_slot(batches):
    import time

    for _ in batches:
        pass
    time.sleep(120)
    yield from ()


def test_three_nodes_on_two_free_slots_get_a_finding_within_ten_seconds(connect_spark):
    from tfos_notebook.runtime.driver.events import FindingRaised

    backend = backend_for(connect_spark)
    backend.probe()  # the session's probe job has run (the first launch of a session pays for it)
    blocker = backend.submit("tfos-test-hold-a-slot", "holds one of the 3 slots",
                             connect_spark.range(0, 1, 1, 1).mapInArrow(hold_slot, "id long").collect)
    time.sleep(2)  # the blocker's task is running
    try:
        t0 = time.monotonic()
        run = Run(connect_spark, node_value, None, 3).start()
        assert run.events.wait_for(
            lambda evs: any(isinstance(e, FindingRaised) and e.finding.code == "gang_not_started" for e in evs),
            timeout=10)
        found_after = time.monotonic() - t0
        print(f"finding after {found_after:.1f}s")
        assert found_after < 10
        finding = next(f for f in run.diagnosis.raised() if f.code == "gang_not_started")
        assert finding.estimated and "(estimate)" in finding.describe()
        assert finding.cause.startswith("none of the 3 nodes has started after ")
        assert "not enough free slots" in finding.remedy
        run.stop()
        assert run.state == "stopped"
    finally:
        blocker.cancel()
        blocker.join(30)
    assert connect_spark.range(10).count() == 10


def test_executors_that_cannot_reach_the_driver_fail_the_launch_saying_why(connect_spark, monkeypatch):
    from tfos_notebook.runtime.driver.spark import DriverUnreachable
    from tfos_notebook.runtime.driver.spark.connect import Probe

    backend = backend_for(connect_spark)
    probe = backend.probe()
    monkeypatch.setattr(backend, "_probe", Probe(probe.executors, ("exec-1: TimeoutError: timed out",),
                                                 probe.versions, probe.at))
    run = Run(connect_spark, node_value, None, 2)
    with pytest.raises(DriverUnreachable) as info:
        run.start()
    assert str(info.value).startswith("the executors cannot connect to this notebook's host 127.0.0.1 "
                                      "(exec-1: TimeoutError: timed out): training needs a client that runs on "
                                      "the cluster's driver")
    assert run.state == "failed"


def test_an_rdd_cannot_be_fed_through_a_connect_session(connect_spark):
    from tfos_notebook.runtime import ConfigError

    class FakeRdd:  # a Connect session makes no RDDs: stand in for one from elsewhere
        pass

    from pyspark import RDD

    rdd = FakeRdd.__new__(type("RDD", (RDD,), {}))
    with pytest.raises(ConfigError, match="a Spark Connect session has no RDDs: pass a DataFrame"):
        backend_for(connect_spark).barrier_over(rdd, lambda *a: [], "x long")


def test_the_cleanup_magic_scans_the_executors_with_a_barrier_job(ip, connect_spark, capsys):
    """%tfos_cleanup on a Connect session: a barrier mapInArrow over every slot lists the leftovers
    of earlier runs (this machine may hold other suites' processes, so only the scan is checked)."""
    from tfos_notebook.runtime.driver.diagnosis.cleanup import scan_cluster

    result = ip.run_cell("%tfos_cleanup")
    assert result.success, result.error_in_exec
    assert capsys.readouterr().out.strip()
    assert isinstance(scan_cluster(connect_spark), list)


def test_tfcluster_run_takes_a_connect_session(connect_spark):
    from tfos_notebook import TFCluster

    cluster = TFCluster.run(connect_spark, node_value, None, 2)
    assert cluster.shutdown() == {"who": "chief:0", "n": 2}


def test_a_killed_node_is_relaunched_under_a_new_tag_and_resumes_from_the_checkpoint(connect_spark, tmp_path):
    """Retry on Connect: the lost attempt's gang is cancelled by its tag and a new one resumes."""
    import os
    import signal
    import sys

    from nbhelpers import child_processes, child_role, wait_until
    from pyspark import cloudpickle

    from tfos_notebook.runtime.driver.events import FindingRaised, LaunchSubmitted, Step

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "runtime", "driver", "run"))
    import test_recovery  # its node function: counts steps, checkpoints every 5, resumes with ctx.restore

    cloudpickle.register_pickle_by_value(test_recovery)
    run = Run(connect_spark, test_recovery.count_with_checkpoints, test_recovery.PLANNED_STEPS, 2,
              model_dir=str(tmp_path), retries=2).start()
    assert wait_until(lambda: max([e.step for e in run.events.events(Step) if e.role == "worker"], default=0) >= 12
                      and (tmp_path / "checkpoint").exists(), 120)  # mid-run, after the chief wrote a checkpoint
    victims = [p for p in child_processes(run.run_id) if child_role(p) == "worker:0"]  # the worker's process
    assert len(victims) == 1
    os.kill(victims[0].pid, signal.SIGKILL)
    result = run.wait(240)
    assert result["final"] == test_recovery.PLANNED_STEPS and result["attempt"] == 1 and result["restored"]
    assert run.results["worker:0"]["start"] == result["start"] >= 5
    assert [e.attempt for e in run.events.events(LaunchSubmitted)] == [0, 1]
    assert "node_lost_retrying" in [e.finding.code for e in run.events.events(FindingRaised)]
    assert connect_spark.range(10).count() == 10
