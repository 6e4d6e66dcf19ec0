"""Two applications (two notebooks' SparkContexts) launching on one standalone cluster, and a
launch right after an application starts, before its executors have registered.

Application A is a driver process of its own (``A_DRIVER``), as a second notebook's kernel is;
application B is this test process's SparkContext. The cluster: 2 workers x 2 cores, no GPUs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from procs import eventually

from tfos_notebook import PreflightError, ReservationTimeout, Run
from tfos_notebook.devcluster import StandaloneCluster
from tfos_notebook.runtime.driver.events import FindingRaised, LaunchSubmitted
from tfos_notebook.state import registry

pytestmark = pytest.mark.cluster

A_DRIVER = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    from tfos_notebook import Run
    from tfos_notebook.notebook import tracker

    conf, meet_dir = json.loads(sys.argv[1]), sys.argv[2]

    def meet(args, ctx):  # every node of both applications is running at once
        import os, time
        open(os.path.join(args, f"A-{ctx.job_name}{ctx.task_index}"), "w").close()
        while len(os.listdir(args)) < 4:
            time.sleep(0.05)
        return ctx.cluster_spec

    def hold(args, ctx):
        import time
        time.sleep(300)

    builder = SparkSession.builder.appName("notebook-A")
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    run = Run(spark.sparkContext, meet if meet_dir else hold, meet_dir or None, 2, name="run-A")
    tracker.track(run)
    run.start()
    if not meet_dir:
        run.events.wait_for(lambda evs: run.state == "running", timeout=120)
    print("A", run.state, flush=True)
    if meet_dir:
        print("SPEC", json.dumps(run.wait(120)), flush=True)
    else:
        sys.stdin.readline()  # the test says when A's notebook is done
        run.stop()
    spark.stop()
""")


@pytest.fixture(scope="module")
def two_app_standalone(feed_cluster, spark_slot):
    """The session's feed cluster (2 workers x 2 cores, no GPUs), with none of its cores held by
    an application of this process when this module starts or ends."""
    spark_slot.stop()
    yield feed_cluster
    spark_slot.stop()


def start_a(cluster: StandaloneCluster, conf: dict, meet_dir: str = "") -> subprocess.Popen:
    """Application A's driver (its Spark log goes to ``a-driver.log`` in the cluster's folder)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen([sys.executable, "-c", A_DRIVER, json.dumps({**cluster.spark_conf(0), **conf}), meet_dir],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(a_log(cluster), "w"),
                            text=True, env=env)


def a_log(cluster: StandaloneCluster) -> Path:
    return cluster.root / "a-driver.log"


def read_line(proc: subprocess.Popen, cluster: StandaloneCluster, prefix: str) -> str:
    for line in proc.stdout:
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    raise AssertionError(f"application A ended ({proc.wait()}) without {prefix!r}:\n"
                         f"{a_log(cluster).read_text()[-3000:]}")


def app_b(spark_slot, cluster: StandaloneCluster, kind: str, **conf: str):
    return spark_slot.get(kind, {**cluster.spark_conf(0), **conf})


def findings(run: Run, code: str) -> list:
    return [e.finding for e in run.events.events(FindingRaised) if e.finding.code == code]


def meet_b(args, ctx):
    import os
    import time

    open(os.path.join(args, f"B-{ctx.job_name}{ctx.task_index}"), "w").close()
    while len(os.listdir(args)) < 4:
        time.sleep(0.05)
    return ctx.cluster_spec


def quick(args, ctx):
    return ctx.task_index


def test_two_applications_with_slots_for_both_run_side_by_side(two_app_standalone, spark_slot, tmp_path):
    spark = app_b(spark_slot, two_app_standalone, "app-B", **{"spark.cores.max": "2"})
    a = start_a(two_app_standalone, {"spark.cores.max": "2"}, str(tmp_path))
    try:
        run = Run(spark.sparkContext, meet_b, str(tmp_path), 2, name="run-B", reservation_timeout=50)
        from tfos_notebook.notebook import tracker

        tracker.track(run)
        try:
            spec_b = run.start().wait(60)  # returns only once A's nodes run too (they meet in tmp_path)
        except TimeoutError as e:
            raise AssertionError(f"{e}; met: {os.listdir(tmp_path)}; application A's log:\n{a_log(two_app_standalone).read_text()[-3000:]}") from e
        spec_a = json.loads(read_line(a, two_app_standalone, "SPEC"))
        assert a.wait(30) == 0
    finally:
        a.kill()
    ports = [addr for spec in (spec_a, spec_b) for addrs in spec.values() for addr in addrs]
    assert len(set(ports)) == 4  # no TensorFlow port clash
    assert sorted(os.listdir(tmp_path)) == ["A-chief0", "A-worker0", "B-chief0", "B-worker0"]
    records: dict = {}
    for r in registry.list_runs():  # newest first
        records.setdefault(r.name, r)
    assert (records["run-A"].state, records["run-B"].state) == ("finished", "finished")
    assert records["run-A"].owner_pid == a.pid and records["run-B"].owner_pid == os.getpid()
    assert records["run-A"].run_id != records["run-B"].run_id


def test_a_fresh_application_whose_cores_another_holds_waits_for_its_executors_and_says_who(
        two_app_standalone, spark_slot):
    spark_slot.stop()
    a = start_a(two_app_standalone, {"spark.cores.max": "4"})  # A takes every core of the cluster
    try:
        assert read_line(a, two_app_standalone, "A") == "running"
        conf = two_app_standalone.spark_conf(0)
        del conf["spark.cores.max"], conf["spark.executor.cores"]  # pre-flight cannot tell how many will come
        sc = spark_slot.get("app-B-late", conf).sparkContext
        backend = Run(sc, quick, None, 2).backend
        assert not backend.cluster().executors  # none can start while A holds the cores
        assert backend.granted_cores() == 0  # and the master says it started none
        t0 = time.monotonic()
        timed_out = Run(sc, quick, None, 2, reservation_timeout=4).start()
        assert time.monotonic() - t0 < 2  # the notebook's kernel is free at once
        with pytest.raises(ReservationTimeout, match=r"waited 4s for 2 free task slots, 0 free") as info:
            timed_out.wait(20)
        assert "application 'notebook-A'" in info.value.findings[0].cause
        assert not timed_out.events.events(LaunchSubmitted)  # no barrier job Spark cannot schedule
        assert not sc.statusTracker().getActiveJobsIds()

        run = Run(sc, quick, None, 2, reservation_timeout=50).start()
        assert run.events.wait_for(lambda evs: any(isinstance(e, FindingRaised) and e.finding.code == "waiting_for_slots"
                                                   for e in evs), timeout=10)
        [waiting] = findings(run, "waiting_for_slots")
        assert waiting.cause.startswith("waiting for 2 free task slots before submitting (0 free now): "
                                        "application 'notebook-A' (app-")
        assert waiting.cause.endswith("holds 4 core(s)")
        assert run.state == "reserving" and not run.events.events(LaunchSubmitted)
        # was a blocker: "no executors are registered with the driver". The count is unknown unless
        # this process's JVM was started by an earlier session with spark.cores.max (JVM-wide
        # defaults): app-B's 2 cores in one executor, or the feed session's 4 in two.
        assert findings(run, "executors_pending")[0].cause in (
            "no executor has registered with the application yet",
            "1 executor(s) the application asked for have not registered yet",
            "2 executor(s) the application asked for have not registered yet")
        a.stdin.write("done\n")
        a.stdin.flush()  # A's notebook stops its run and its session: its cores free
        assert a.wait(30) == 0
        assert run.wait(45) == 0
        assert backend.granted_cores() == sum(e.cores for e in backend.cluster().executors) > 0
    finally:
        a.kill()


def test_a_wait_for_executors_fails_at_once_when_they_come_and_are_too_few(two_app_standalone, spark_slot):
    spark = app_b(spark_slot, two_app_standalone, "app-small", **{"spark.cores.max": "1", "spark.executor.cores": "1"})
    run = Run(spark.sparkContext, quick, None, 2, reservation_timeout=50)
    assert not run.backend.cluster().executors  # its one executor is still starting
    run.start()
    with pytest.raises(PreflightError, match="the launch needs 2 task slots at once but the cluster has 1"):
        run.wait(45)
    assert eventually(lambda: run.state == "failed")
    assert not run.events.events(LaunchSubmitted)
