"""Recovery: a node whose training process is killed mid-run is relaunched with its peers, and
they resume from the latest checkpoint in the model dir."""

from __future__ import annotations

import os
import signal
import time

import pytest
from procs import child_processes, child_role

from tfos_notebook import NodeError, Run
from tfos_notebook.runtime.driver.events import FindingRaised, LaunchSubmitted, Step

PLANNED_STEPS = 40


def count_with_checkpoints(args, ctx):
    import time
    from pathlib import Path

    import tensorflow as tf

    # Real training's first collective holds every node until all have started; this function
    # has no collectives, so the nodes meet here instead and restore the same checkpoint.
    meet = Path(ctx.model_dir, f"started-{ctx.attempt}")
    meet.mkdir(exist_ok=True)
    (meet / f"{ctx.job_name}-{ctx.task_index}").touch()
    while len(list(meet.iterdir())) < ctx.num_workers:
        time.sleep(0.05)
    step = tf.Variable(0, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(step=step)
    restored = ctx.restore(checkpoint)
    start = int(step.numpy())
    manager = tf.train.CheckpointManager(checkpoint, ctx.model_dir, max_to_keep=2) if ctx.is_chief else None
    while int(step.numpy()) < args:
        time.sleep(0.15)
        step.assign_add(1)
        ctx.report(int(step.numpy()), loss=1.0 / int(step.numpy()))
        if manager and int(step.numpy()) % 5 == 0:
            manager.save()
    return {"start": start, "final": int(step.numpy()), "attempt": ctx.attempt, "restored": restored}


def test_a_killed_node_is_relaunched_and_resumes_from_the_checkpoint(standalone, tmp_path):
    run = Run(standalone.sparkContext, count_with_checkpoints, PLANNED_STEPS, 2, model_dir=str(tmp_path),
              retries=2).start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # mid-run, after the chief wrote a checkpoint
        steps = [e.step for e in run.events.events(Step) if e.role == "worker"]
        if steps and max(steps) >= 12 and (tmp_path / "checkpoint").exists():
            break
        time.sleep(0.1)
    victims = [p for p in child_processes(run.run_id) if child_role(p) == "worker:0"]
    assert len(victims) == 1
    os.kill(victims[0].pid, signal.SIGKILL)  # the worker's training process dies
    result = run.wait(240)
    assert result["final"] == PLANNED_STEPS
    assert result["attempt"] == 1 and result["start"] >= 5 and result["restored"]
    assert run.results["worker:0"]["start"] == result["start"]
    assert [e.attempt for e in run.events.events(LaunchSubmitted)] == [0, 1]
    codes = [e.finding.code for e in run.events.events(FindingRaised)]
    assert "node_lost_retrying" in codes


def die_by_signal(args, ctx):
    import os
    import signal

    if ctx.job_name == "worker":
        os.kill(os.getpid(), signal.SIGKILL)
    import time

    time.sleep(60)


def test_retries_are_bounded_and_the_final_error_says_why(local_spark):
    run = Run(local_spark.sparkContext, die_by_signal, None, 2, retries=1).start()
    with pytest.raises(NodeError, match=r"killed by signal SIGKILL\n\(after 2 attempts; retries=1\)"):
        run.wait(180)
    assert [e.attempt for e in run.events.events(LaunchSubmitted)] == [0, 1]
    assert run.state == "failed"


def raise_once(args, ctx):
    raise ValueError("a bug, not a lost node")


def test_an_exception_in_the_function_is_not_retried(local_spark):
    run = Run(local_spark.sparkContext, raise_once, None, 2, retries=2).start()
    with pytest.raises(NodeError, match="a bug, not a lost node"):
        run.wait(120)
    assert [e.attempt for e in run.events.events(LaunchSubmitted)] == [0]
