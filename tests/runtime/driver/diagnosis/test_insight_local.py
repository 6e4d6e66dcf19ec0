"""Insight on real runs (local[2] Spark, real nodes): a node that sleeps in each step is named a
straggler; a node fed from a DataFrame computed by an expensive UDF is input-bound, and one fed
from the same DataFrame cached is not; a plain ``ctx.report`` loop gets steps/s and, with a
total, its progress."""

from __future__ import annotations

from tfos_notebook import Run
from tfos_notebook.runtime.driver.events import FindingRaised, Pace


def uneven_steps(args, ctx):
    import time

    pause = 0.08 if ctx.job_name == "worker" else 0.02  # both nodes run for about 7 s
    steps = int(args["secs"] / pause)
    for step in range(steps):
        time.sleep(pause)
        ctx.report(step + 1, total=steps, loss=1.0 / (step + 1))
    return "done"


def findings(run, code: str) -> list:
    return [e.finding for e in run.events.events(FindingRaised) if e.finding.code == code]


def test_a_node_that_sleeps_in_each_step_is_named_a_straggler_and_report_users_get_progress(local_spark):
    run = Run(local_spark, uneven_steps, {"secs": 7}, 2).start()
    run.wait(180)
    [f] = findings(run, "straggler")
    assert f.cause.startswith("worker:0 on ") and " is a straggler: its steps take " in f.cause
    assert "x the other nodes' " in f.cause and f.remedy.endswith("%tfos_profile RUN --nodes worker:0")
    paces = run.events.events(Pace)
    assert {p.name for p in paces} == {"chief:0", "worker:0"}
    last = [p for p in paces if p.name == "worker:0"][-1]
    assert (last.steps, last.step, last.total_steps) == (86, 87, 87)  # steps between the first and last report
    done = run.progress()  # the totals of the ended run
    assert done.ended and done.eta is None and 0.98 < done.fraction <= 1.0
    rates = {n.name: n.steps_per_sec for n in done.nodes}
    assert 5 < rates["worker:0"] < 13 < rates["chief:0"] < 50, rates


def consume(args, ctx):
    import time

    feed = ctx.get_data_feed()
    while not feed.should_stop():
        if feed.next_batch(16):
            time.sleep(args["compute"])  # the step's own work
    return "fed"


def slow_square(x):
    import time

    time.sleep(0.02)  # an expensive Python UDF: 20 ms per row
    return x * x


def fed_frame(spark, rows: int):
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    return spark.range(0, rows, numPartitions=4).select(F.udf(slow_square, LongType())("id").alias("x"))


def waits(run) -> list:
    return [(p.name, p.secs, p.wait_secs) for p in run.events.events(Pace) if p.input_measured]


def test_a_node_fed_by_an_expensive_udf_is_input_bound_and_none_once_the_frame_is_cached(local_spark4):
    # fed over the network by Spark tasks beside the nodes (local[4]: 2 slots for them), which
    # compute the frame on every epoch: the UDF is what the nodes wait for
    run = Run(local_spark4, consume, {"compute": 0.05}, 2, input_mode="spark").start()
    run.train(fed_frame(local_spark4, 768), num_epochs=1)
    run.wait(300)
    bound = findings(run, "input_bound")
    assert bound, waits(run)
    assert " is input-bound: it spends " in bound[0].cause and bound[0].cause.endswith(
        "% of its time waiting for the next batch from Spark")
    assert all(n.wait_share > 0.5 for n in run.progress().nodes), waits(run)

    cached = fed_frame(local_spark4, 768).cache()
    assert cached.count() == 768  # computed once, before the run
    run = Run(local_spark4, consume, {"compute": 0.05}, 2, input_mode="spark").start()
    run.train(cached, num_epochs=5)
    run.wait(300)
    cached.unpersist()
    assert findings(run, "input_bound") == [], waits(run)
    shares = [n.wait_share for n in run.progress().nodes]
    assert all(share < 0.5 for share in shares), waits(run)
    print(f"input wait, cached: {shares}")
