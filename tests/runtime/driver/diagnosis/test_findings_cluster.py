"""Findings produced for real on the standalone cluster (2 executors, 1 slot each)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tfos_notebook import NodeError, PreflightError, ReservationTimeout, Run, SparkJobError
from tfos_notebook.runtime.driver.events import FindingRaised, Registered


def quick(args, ctx):
    return ctx.job_name


def codes(run) -> list[str]:
    return [e.finding.code for e in run.events.events(FindingRaised)]


def test_a_job_holding_a_slot_is_named_and_a_stall_is_diagnosed_within_seconds(standalone):
    sc = standalone.sparkContext

    def hold(_):
        import time

        time.sleep(25)
        return 1

    blocker = threading.Thread(target=lambda: sc.parallelize([0], 1).map(hold).collect(), daemon=True)
    blocker.start()
    deadline = time.monotonic() + 60
    tracker = sc.statusTracker()
    while time.monotonic() < deadline and not any(
            (tracker.getStageInfo(s) or 0) and tracker.getStageInfo(s).numActiveTasks
            for s in tracker.getActiveStageIds()):
        time.sleep(0.1)  # until its task runs on one of the two slots
    run = Run(sc, quick, None, 2).start()
    assert "slots_held_by_other_jobs" in codes(run)
    [held] = [e.finding for e in run.events.events(FindingRaised) if e.finding.code == "slots_held_by_other_jobs"]
    assert "1 of 2 slots are held by other running jobs" in held.cause
    assert any("running: job" in line for line in held.evidence)
    # the barrier stage waits for both slots: the run starts once the other job ends
    t0 = time.monotonic()
    assert run.wait(120) == "chief"
    assert time.monotonic() - t0 > 5
    blocker.join(60)


def test_stall_after_one_registration_is_reported_within_five_seconds(standalone):
    run = _SlowSecondNode(standalone.sparkContext, quick, None, 2)
    run.stall_secs = 3.0
    run.start()
    assert run.events.wait_for(lambda evs: sum(isinstance(e, Registered) for e in evs) == 1, timeout=60)
    first = run.events.events(Registered)[0].t
    assert run.events.wait_for(
        lambda evs: any(isinstance(e, FindingRaised) and e.finding.code == "registration_stalled" for e in evs),
        timeout=15)
    [stall] = [e for e in run.events.events(FindingRaised) if e.finding.code == "registration_stalled"]
    latency = stall.t - first
    print(f"stall-to-finding latency: {latency:.2f}s (stall_secs={run.stall_secs})")
    assert latency <= 5.0
    assert "1 of 2 nodes registered" in stall.finding.cause
    assert run.wait(120) == "chief"


class _DelayedPlan:
    """Wraps a NodePlan: task 1 sleeps 15 s before running the node (a slow executor)."""

    def __init__(self, plan):
        self.plan = plan

    def __call__(self, task, gpus):
        import time

        if task == 1:
            time.sleep(15)
        return self.plan(task, gpus)


class _SlowSecondNode(Run):
    def plan(self, attempt):
        return _DelayedPlan(super().plan(attempt))


def test_dynamic_allocation_is_refused_before_submitting(standalone_cluster):
    script = textwrap.dedent(f"""
        import sys
        from pyspark.sql import SparkSession
        from tfos_notebook import Run, PreflightError
        spark = (SparkSession.builder.master("{standalone_cluster.master_url}")
                 .config("spark.dynamicAllocation.enabled", "true")
                 .config("spark.dynamicAllocation.shuffleTracking.enabled", "true")
                 .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1").getOrCreate())
        try:
            Run(spark.sparkContext, lambda a, c: None, None, 2, preflight_wait=0).start()
        except PreflightError as e:
            print("PREFLIGHT:", e)
        spark.stop()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert "PREFLIGHT: cannot launch 2 nodes" in out.stdout, out.stderr[-2000:]
    assert "dynamic allocation is on, and Spark refuses barrier-mode stages with it" in out.stdout
    assert "spark.dynamicAllocation.enabled=false" in out.stdout


@pytest.mark.slow
@pytest.mark.spark
def test_a_launch_right_after_a_local_cluster_starts_waits_for_its_executors():
    """``local-cluster[N,C,M]`` (Spark's own test cluster, where TensorFlowOnSpark runs its tests)
    starts N executors of its own, which register a few seconds after the context: a launch made
    at once waits for them (here TFCluster.run, as TensorFlowOnSpark's tests launch) instead of being
    refused for want of slots. Failed before: "the launch needs 2 task slots at once but the cluster
    has 0" (local-cluster was taken for local mode, whose driver runs the tasks)."""
    script = textwrap.dedent("""
        from pyspark.sql import SparkSession
        from tfos_notebook import TFCluster

        def quick(args, ctx):
            return ctx.job_name

        spark = (SparkSession.builder.master("local-cluster[2,1,1024]").config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1").getOrCreate())
        cluster = TFCluster.run(spark.sparkContext, quick, None, 2, input_mode=TFCluster.InputMode.TENSORFLOW)
        cluster.shutdown()
        print("TFCluster.run: ok")
        spark.stop()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.stdout.splitlines() == ["TFCluster.run: ok"], out.stderr[-3000:]


@pytest.mark.slow
def test_a_launch_right_after_a_standalone_application_starts_with_no_executor_count_waits_for_them(
        standalone_cluster):
    """An application on a standalone master with no executor count configured (no
    spark.executor.instances or spark.cores.max, the master's UI not named), launched at once, as
    TensorFlowOnSpark's own test_TFParallel does: its executors register one by one, and the launch
    waits for them to settle instead of being refused when the first one is there."""
    script = textwrap.dedent(f"""
        from pyspark.sql import SparkSession
        from tfos_notebook import Run, TFCluster

        def quick(args, ctx):
            return ctx.job_name

        spark = (SparkSession.builder.master("{standalone_cluster.master_url}").config("spark.executor.cores", "1")
                 .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1").getOrCreate())
        cluster = TFCluster.run(spark.sparkContext, quick, None, 2, input_mode=TFCluster.InputMode.TENSORFLOW)
        cluster.shutdown()
        print("TFCluster.run: ok")
        spark.stop()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.stdout.splitlines() == ["TFCluster.run: ok"], out.stderr[-3000:]


def occupy_own_port(args, ctx):
    import json
    import os
    import socket

    import tensorflow as tf

    me = json.loads(os.environ["TF_CONFIG"])["task"]
    host, port = ctx.cluster_spec[me["type"]][me["index"]].rsplit(":", 1)
    squatter = socket.socket()
    squatter.bind((host, int(port)))
    squatter.listen()
    tf.distribute.MultiWorkerMirroredStrategy()


def test_an_occupied_tf_port_is_named(standalone):
    run = Run(standalone.sparkContext, occupy_own_port, None, 2).start()
    with pytest.raises(NodeError) as info:
        run.wait(180)
    assert "Could not start gRPC server" in info.value.traceback_text
    assert [f.code for f in info.value.findings] == ["port_in_use"]
    assert "likely cause: TensorFlow on" in str(info.value) and "could not bind its port" in str(info.value)
    assert "port_in_use" in codes(run)


class _CannotReachDriver(Run):
    """Nodes are told a driver port where nothing listens: they crash before registering."""

    def plan(self, attempt):
        import socket

        plan = super().plan(attempt)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            plan.server_port = s.getsockname()[1]
        return plan


def test_a_node_that_crashes_before_registering_is_reported_with_its_error(standalone):
    run = _CannotReachDriver(standalone.sparkContext, quick, None, 2, reservation_timeout=60).start()
    assert run.events.wait_for(
        lambda evs: any(isinstance(e, FindingRaised) and e.finding.code == "node_crashed_before_registering"
                        for e in evs), timeout=45)
    [crash] = [e.finding for e in run.events.events(FindingRaised) if e.finding.code == "node_crashed_before_registering"]
    assert "ConnectionRefusedError" in " ".join(crash.evidence)
    with pytest.raises((SparkJobError, ReservationTimeout), match="ConnectionRefusedError|reservations"):
        run.wait(120)


def import_tensorflow(args, ctx):
    import tensorflow  # noqa: F401


def test_tensorflow_import_failure_from_a_bad_environment(standalone, tmp_path):
    shadow = tmp_path / "tensorflow"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('this tensorflow is a broken copy')\n")
    run = Run(standalone.sparkContext, import_tensorflow, None, 2, env={"PYTHONPATH": str(tmp_path)}).start()
    with pytest.raises(NodeError) as info:
        run.wait(120)
    assert "ImportError: this tensorflow is a broken copy" in info.value.traceback_text
    [finding] = info.value.findings
    assert finding.code == "tensorflow_import_failed"
    assert "PYTHONPATH shadows it" in finding.remedy


def test_preflight_error_keeps_the_context(standalone):
    with pytest.raises(PreflightError):
        Run(standalone.sparkContext, quick, None, 5).start()
    assert standalone.sparkContext.parallelize(range(3)).count() == 3
