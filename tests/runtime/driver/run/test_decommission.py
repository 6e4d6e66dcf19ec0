"""A decommission notice becomes a checkpoint: every training node saves at the same step, and the
run goes on from it. On local Spark there is no executor to decommission, so the scheduler's answer
is stood in for (``backend.decommissioning``, the one call the driver makes to Spark for it); the
nodes, their agreement, TensorFlow's saves and the relaunch are real. The standalone tests below
decommission a real executor with SIGPWR."""

from __future__ import annotations

import html
import os
import threading
import time

import pytest

from tfos_notebook import Run
from tfos_notebook.devcluster import StandaloneCluster
from tfos_notebook.examples.elastic import EPOCHS, STEPS_PER_EPOCH
from tfos_notebook.examples.elastic import train as keras_mwms
from tfos_notebook.notebook.monitorhtml import snapshot_html
from tfos_notebook.notebook.tracker import track
from tfos_notebook.notebook.view import RunView
from tfos_notebook.runtime.driver.events import (
    AttemptEnded,
    CheckpointSaved,
    Decommissioning,
    FindingRaised,
    LaunchSubmitted,
    Pace,
    Registered,
)
from tfos_notebook.runtime.driver.spark import backend_for
from tfos_notebook.runtime.driver.spark.standalone import master_state
from tfos_notebook.runtime.host.timeouts import Deadline
from tfos_notebook.state import registry
from tfos_notebook.tensorboard.mirror import Mirror


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


def keras_fed(args, ctx):
    """InputMode.SPARK: each node fits its own small model on what Spark feeds it (``ctx.dataset``,
    an epoch of unknown length), ``ctx.callbacks()`` backing it up; returns the epochs it ran and
    the rows it took in this attempt."""
    import time

    import tensorflow as tf

    model = tf.keras.Sequential([tf.keras.Input((1,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    seen = {"rows": 0, "epochs": []}

    class Count(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            seen["epochs"].append(epoch)

        def on_train_batch_end(self, batch, logs=None):
            seen["rows"] += 10
            time.sleep(args["step_secs"])

    model.fit(ctx.dataset(10, features="x", label="y"), epochs=args["epochs"], verbose=0,
              callbacks=[Count(), *ctx.callbacks(checkpoint=False)])
    return {"epochs": seen["epochs"], "rows": seen["rows"], "attempt": ctx.attempt}


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


def _scalar_steps(logdir, tag: str) -> list[int]:
    """The steps of ``tag``'s points in every event file of ``logdir``."""
    import tensorflow as tf

    return [event.step for name in sorted(os.listdir(logdir))
            for event in tf.compat.v1.train.summary_iterator(os.path.join(logdir, name))
            for value in event.summary.value if value.tag == tag]


def _steps(run) -> int:
    return max((e.steps for e in run.events.events(Pace) if e.role == "chief"), default=0)


def test_keras_mwms_saves_at_one_step_and_resumes_there(local_spark, tmp_path, monkeypatch):
    monkeypatch.setenv("TFOS_NOTEBOOK_STATE_DIR", str(tmp_path / "state"))  # the runs registry of this test
    store = f"file://{tmp_path}/mlruns"  # a store every runtime's MLflow has (mlflow-skinny: no sqlite)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3.7+ refuses a file store without it
    run = Run(local_spark.sparkContext, keras_mwms, {"step_secs": 0.05}, 2, model_dir=str(tmp_path), retries=0,
              mlflow=True)
    said = _notice_when(run, lambda: _steps(run) >= STEPS_PER_EPOCH + 5)  # mid-way through the second epoch
    view = RunView(run.name, run.run_id)
    run.events.subscribe(view.apply)
    tracking = track(run)  # the record the runs sidebar shows
    mirror = Mirror(str(tmp_path / "mirror"))  # what the run's TensorBoard reads
    run.set_file_sink(mirror.receive)
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
    where = run.events.events(Decommissioning)[0].host
    assert where == run.nodes[0].where  # the node's host by name and address, rather than Spark's worker host
    codes = [e.finding.code for e in run.events.events(FindingRaised)]
    assert "executor_decommissioning" in codes and "decommission_checkpoint" in codes
    # shown: the monitor (widget and saved snapshot) and the sidebar's record list the attempts
    assert view.attempts == [
        f"executor driver on {where} is decommissioning (chief:0, worker:0)",
        f"checkpoint saved at step {step}, {saved[0].seconds:.1f}s after the notice",
        f"attempt 1 (2 training nodes) ended: its executor decommissioned, resumed from step {step}",
        "attempt 2: 2 nodes (chief:0, worker:0)"]
    assert all(html.escape(line) in snapshot_html(view) for line in view.attempts)
    tracking.stop()
    assert list(registry.get_run(run.run_id).attempts) == view.attempts
    # TensorBoard: the chief's epochs once each across the two attempts' event files
    assert sorted(_scalar_steps(tmp_path / "mirror" / "chief_0" / "train", "epoch_loss")) == [0, 1, 2, 3]
    # tracked: the MLflow run's epochs once each, across the two attempts, and how the first ended
    from mlflow.tracking import MlflowClient  # here: at collection, MLflow 2's pkg_resources would put
    # setuptools' vendored packages on sys.path for the stack tests' install check
    client = MlflowClient(store)
    assert run.tracking.wait(60)
    logged = client.get_run(run.tracking.mlflow_run_id)
    assert [m.step for m in client.get_metric_history(logged.info.run_id, "loss")] == [1, 2, 3, 4]
    assert logged.data.tags["tfos.attempts"] == "2"
    assert logged.data.tags["tfos.attempt.1"].startswith("decommission, 2 training nodes: executor driver")
    assert logged.data.tags["tfos.attempt.1"].endswith(f"resumed from step {step}")


def test_a_custom_loop_saves_through_step_boundary(local_spark, tmp_path):
    run = Run(local_spark.sparkContext, custom_loop, {"steps": 60, "step_secs": 0.05}, 2, model_dir=str(tmp_path),
              retries=0)
    _notice_when(run, lambda: _steps(run) >= 10)
    result = run.start().wait(240)
    step = run.events.events(CheckpointSaved)[0].step
    assert result == {"final": 60, "start": step, "attempt": 1}
    assert run.results["worker:0"]["start"] == step


def test_a_fed_run_resumes_at_the_start_of_its_checkpoints_epoch(local_spark, tmp_path):
    """InputMode.SPARK, in-stage: the relaunched attempt is fed again from the first epoch, and
    Keras (an epoch of unknown length: the backup keeps the epoch) resumes at the start of the
    checkpoint's epoch: that epoch's rows before the checkpoint are the ones taken twice."""
    df = local_spark.createDataFrame([(float(i), 2.0 * i) for i in range(200)], "x double, y double")
    run = Run(local_spark.sparkContext, keras_fed, {"step_secs": 0.1, "epochs": 4}, 1, model_dir=str(tmp_path),
              retries=0, input_mode="spark")
    _notice_when(run, lambda: _steps(run) >= 25)  # 20 batches an epoch: in the second
    result = run.start(df, epochs=4).wait(300)
    step = run.events.events(CheckpointSaved)[0].step
    assert 20 < step < 40
    assert result["attempt"] == 1 and result["epochs"] == [1, 2, 3]  # the checkpoint's epoch again, then the rest
    assert result["rows"] == 3 * 200


@pytest.fixture(scope="module")
def decommission_spark(spark_slot):
    """An application on a standalone cluster of 3 one-core workers with graceful decommission on."""
    cluster = StandaloneCluster(workers=3, cores=1, gpus_per_worker=0, decommission=True).start()
    spark = spark_slot.get("decommission", {
        **cluster.spark_conf(gpus_per_task=0, executor_cores=1),
        "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "1s",
        "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "1",
    })
    yield cluster, spark
    spark_slot.stop()
    cluster.stop()


def _three_workers(cluster, spark) -> None:
    """Replace the workers an earlier test decommissioned (they stay, refusing executors) and wait
    until the application has a free slot on each of three."""
    state = master_state(cluster.master_url, cluster.ui_port, timeout=5)
    for _ in range(3 - sum(1 for w in state["workers"] if w.get("state") == "ALIVE")):
        cluster.add_worker()
    backend = backend_for(spark)
    assert Deadline(90).wait_until(lambda: backend.cluster().free_slots >= 3, interval=0.2)


def _sigpwr_when(run, cluster, spark, ready) -> dict:
    """SIGPWR to the worker hosting worker:1's executor once ``ready()`` (checked on a thread)."""
    said: dict = {}

    def watch():
        while run.attempt == 0 and not run.done:
            if ready():
                executor = next(e.executor_id for e in run.events.events(Registered) if e.role == "worker"
                                and e.index == 1)
                said["pid"] = cluster.decommission_executor(executor, spark.sparkContext.applicationId)
                said["at"] = time.monotonic()
                return
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    return said


@pytest.mark.slow
@pytest.mark.cluster
def test_sigpwr_to_a_worker_checkpoints_and_the_run_goes_on_at_two_workers(decommission_spark, tmp_path):
    cluster, spark = decommission_spark
    _three_workers(cluster, spark)
    run = Run(spark, keras_mwms, {"step_secs": 0.05}, 3, model_dir=str(tmp_path), retries=0, min_workers=2,
              replacement_grace=3.0)
    said = _sigpwr_when(run, cluster, spark, lambda: _steps(run) >= STEPS_PER_EPOCH + 5)
    result = run.start().wait(400)
    assert said, "the worker was never sent SIGPWR"
    noticed = run.events.events(Decommissioning)[0]
    saved = run.events.events(CheckpointSaved)[0]
    assert noticed.t - (time.time() - (time.monotonic() - said["at"])) < 2.0  # the notice within 2 s
    assert saved.seconds < 5.0
    step = saved.step
    assert result["final"] == EPOCHS * STEPS_PER_EPOCH and result["start"] == step
    assert result["workers"] == 2 and result["attempt"] == 1
    assert [(e.cause, e.workers, e.step) for e in run.events.events(AttemptEnded)] == [("decommission", 3, step)]
    assert [e.num_tasks for e in run.events.events(LaunchSubmitted)] == [3, 2]
    codes = [e.finding.code for e in run.events.events(FindingRaised)]
    assert "run_resized" in codes


@pytest.mark.slow
@pytest.mark.cluster
def test_a_replacement_worker_within_the_grace_keeps_three_workers(decommission_spark, tmp_path):
    cluster, spark = decommission_spark
    _three_workers(cluster, spark)
    run = Run(spark, keras_mwms, {"step_secs": 0.05}, 3, model_dir=str(tmp_path), retries=0, min_workers=2,
              replacement_grace=60.0)
    said = _sigpwr_when(run, cluster, spark, lambda: _steps(run) >= 10)
    run.start()
    Deadline(120).wait_until(lambda: run.events.events(CheckpointSaved), interval=0.1)
    cluster.add_worker()  # the cloud's replacement node
    result = run.wait(400)
    assert said and result["workers"] == 3 and result["final"] == EPOCHS * STEPS_PER_EPOCH
    assert result["start"] == run.events.events(CheckpointSaved)[0].step
    assert [e.num_tasks for e in run.events.events(LaunchSubmitted)] == [3, 3]


@pytest.mark.slow
@pytest.mark.cluster
def test_a_loss_without_notice_resumes_from_the_last_epoch_backup(decommission_spark, tmp_path):
    cluster, spark = decommission_spark
    _three_workers(cluster, spark)
    run = Run(spark, keras_mwms, {"step_secs": 0.05}, 3, model_dir=str(tmp_path), retries=1, min_workers=2,
              replacement_grace=20.0)
    run.start()
    Deadline(120).wait_until(lambda: _steps(run) >= STEPS_PER_EPOCH + 5, interval=0.05)
    executor = next(e.executor_id for e in run.events.events(Registered) if e.role == "worker" and e.index == 1)
    cluster.executor_process(executor, spark.sparkContext.applicationId).kill()  # it dies at once: no notice
    result = run.wait(400)
    assert result["final"] == EPOCHS * STEPS_PER_EPOCH
    assert result["start"] == STEPS_PER_EPOCH  # the epoch's end backup before the loss
    assert not run.events.events(CheckpointSaved)
    assert [e.cause for e in run.events.events(AttemptEnded)] == ["lost"]
