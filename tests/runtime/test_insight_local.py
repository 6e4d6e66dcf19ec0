"""Insight on real runs (local[2] Spark, real nodes): a node that sleeps in each step is named a
straggler; a node fed from a DataFrame computed by an expensive UDF is input-bound, and one fed
from the same DataFrame cached is not; a plain ``ctx.report`` loop gets steps/s and, with a
total, its progress."""

from __future__ import annotations

import time

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

    time.sleep(0.008)  # an expensive Python UDF: 8 ms per row
    return x * x


def fed_frame(spark, rows: int):
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    return spark.range(0, rows, numPartitions=2).select(F.udf(slow_square, LongType())("id").alias("x"))


def test_a_node_fed_by_an_expensive_udf_is_input_bound_and_none_once_the_frame_is_cached(local_spark):
    slow = fed_frame(local_spark, 512)
    run = Run(local_spark, consume, {"compute": 0.03}, 2, input_mode="spark").start(slow, epochs=3)
    run.wait(300)
    bound = findings(run, "input_bound")
    assert bound, [e.share for e in run.events.events(Pace)]
    assert " is input-bound: it spends " in bound[0].cause and bound[0].cause.endswith(
        "% of its time waiting for the next batch from Spark")
    share = run.progress().nodes[0].wait_share
    assert share is not None and share > 0.5

    cached = fed_frame(local_spark, 512).cache()
    assert cached.count() == 512  # computed once, before the run
    began = time.monotonic()
    run = Run(local_spark, consume, {"compute": 0.03}, 2, input_mode="spark").start(cached, epochs=6)
    run.wait(300)
    cached.unpersist()
    assert findings(run, "input_bound") == []
    paces = [p for p in run.events.events(Pace) if p.input_measured]
    waited = sum(p.wait_secs for p in paces) / sum(p.secs for p in paces)
    assert waited < 0.3, waited
    print(f"cached run: {time.monotonic() - began:.1f}s, waited {waited:.0%} of the time")
