"""A decommission notice becomes a checkpoint: every training node saves at the same step, and the
run goes on from it. On local Spark there is no executor to decommission, so the scheduler's answer
is stood in for (``backend.decommissioning``, the one call the driver makes to Spark for it); the
nodes, their agreement, TensorFlow's saves and the relaunch are real. The standalone tests below
decommission a real executor with SIGPWR."""

from __future__ import annotations

import time

from tfos_notebook import Run
from tfos_notebook.runtime.driver.events import AttemptEnded, CheckpointSaved, Decommissioning, FindingRaised, Pace

STEPS_PER_EPOCH = 30
EPOCHS = 4


def keras_mwms(args, ctx):
    """A small model trained with tf-keras under MultiWorkerMirroredStrategy, ``ctx.callbacks()``
    backing it up; each step sleeps ``args["step_secs"]`` so that a notice lands mid-epoch.
    Returns the optimizer's final step count, the step it resumed at and the workers it ran with."""
    import time

    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(8, activation="relu"),
                                     tf.keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(STEPS_PER_EPOCH * 8, 4)).astype("float32"), rng.normal(size=(STEPS_PER_EPOCH * 8, 1))
    data = tf.data.Dataset.from_tensor_slices((x, y.astype("float32"))).batch(8).repeat()
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    data = data.with_options(options)

    class Slow(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            time.sleep(args["step_secs"])

    start = {}

    class Start(tf.keras.callbacks.Callback):  # after the backup's restore
        def on_train_batch_begin(self, batch, logs=None):
            start.setdefault("step", int(self.model.optimizer.iterations.numpy()))

    model.fit(data, epochs=EPOCHS, steps_per_epoch=STEPS_PER_EPOCH, verbose=0,
              callbacks=[*ctx.callbacks(checkpoint=False), Start(), Slow()])
    return {"final": int(model.optimizer.iterations.numpy()), "start": start["step"], "workers": ctx.num_workers,
            "attempt": ctx.attempt}


def custom_loop(args, ctx):
    """A custom loop with a ``tf.train.CheckpointManager`` meeting ``ctx.step_boundary`` after each
    step; no strategy (each node alone). Returns the final and first step."""
    import time

    import tensorflow as tf

    step = tf.Variable(0, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(step=step)
    ctx.restore(checkpoint)
    start = int(step.numpy())
    directory = ctx.model_dir if ctx.is_chief else f"{ctx.model_dir}/tmp-{ctx.job_name}-{ctx.task_index}"
    manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=2)
    while int(step.numpy()) < args["steps"]:
        time.sleep(args["step_secs"])
        step.assign_add(1)
        ctx.report(int(step.numpy()))
        ctx.step_boundary(int(step.numpy()), manager.save)
    return {"final": int(step.numpy()), "start": start, "attempt": ctx.attempt}


def _notice_when(run, ready) -> dict:
    """Have the run's backend report the executor of the chief as decommissioning once ``ready()``."""
    said: dict = {}
    real = run.backend.decommissioning

    def decommissioning(executor_ids):
        if "at" not in said and ready():
            said["at"] = time.monotonic()
        if "at" in said and run.attempt == 0:
            return {next(iter(executor_ids)): "host-b"}
        return real(executor_ids)

    run.backend.decommissioning = decommissioning
    return said


def _steps(run) -> int:
    return max((e.steps for e in run.events.events(Pace) if e.role == "chief"), default=0)


def test_keras_mwms_saves_at_one_step_and_resumes_there(local_spark, tmp_path):
    run = Run(local_spark.sparkContext, keras_mwms, {"step_secs": 0.05}, 2, model_dir=str(tmp_path), retries=0)
    said = _notice_when(run, lambda: _steps(run) >= STEPS_PER_EPOCH + 5)  # mid-way through the second epoch
    result = run.start().wait(300)
    assert said, "the notice was never given"
    saved = run.events.events(CheckpointSaved)
    assert len(saved) == 1 and saved[0].attempt == 0
    step = saved[0].step
    assert STEPS_PER_EPOCH < step < 2 * STEPS_PER_EPOCH  # mid-epoch: not an epoch's end backup
    assert saved[0].seconds < 5.0
    assert result["final"] == EPOCHS * STEPS_PER_EPOCH  # the step count the run would have had
    assert result["start"] == step and result["attempt"] == 1  # resumed at the checkpoint's step, nothing lost
    assert run.results["worker:0"]["start"] == step
    ended = run.events.events(AttemptEnded)
    assert [(e.attempt, e.cause, e.step, e.workers) for e in ended] == [(0, "decommission", step, 2)]
    assert "host-b" in run.events.events(Decommissioning)[0].host
    codes = [e.finding.code for e in run.events.events(FindingRaised)]
    assert "executor_decommissioning" in codes and "decommission_checkpoint" in codes


def test_a_custom_loop_saves_through_step_boundary(local_spark, tmp_path):
    run = Run(local_spark.sparkContext, custom_loop, {"steps": 60, "step_secs": 0.05}, 2, model_dir=str(tmp_path),
              retries=0)
    _notice_when(run, lambda: _steps(run) >= 10)
    result = run.start().wait(240)
    step = run.events.events(CheckpointSaved)[0].step
    assert result == {"final": 60, "start": step, "attempt": 1}
    assert run.results["worker:0"]["start"] == step
