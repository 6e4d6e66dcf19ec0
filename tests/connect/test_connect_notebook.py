"""The notebook on a Spark Connect session: %%tfos_train with MultiWorkerMirroredStrategy, input
mode spark from a Connect DataFrame, and the example notebooks 01 and 06."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbhelpers import TRAINING_CELL, TRAINING_HELPERS

from tfos_notebook.runtime import Run

NOTEBOOKS = Path(__file__).resolve().parents[2] / "example_notebooks"


def dataset_ids_per_epoch(args, ctx):
    ds = ctx.dataset(32, features=["id", "x"])
    epochs = []
    for _ in range(args["epochs"]):
        ids = []
        for batch in ds:
            i, x = batch["id"].numpy(), batch["x"].numpy()
            assert (x == i * 2).all()
            ids += i.tolist()
        epochs.append(ids)
    return epochs


@pytest.mark.slow
def test_the_magic_trains_a_two_worker_mwms_model(ip, connect_spark):
    ip.run_cell(TRAINING_HELPERS)
    result = ip.run_cell(f"%%tfos_train --workers 2 --epochs 3 --name digits --monitor text\n{TRAINING_CELL}")
    assert result.success, result.error_in_exec
    run = ip.user_ns["digits"]
    assert run.run.backend.kind == "connect"
    value = run.wait(300)
    assert value["accuracy"] > 0.5 and set(run.results) == {"chief:0", "worker:0"}
    assert ip.run_cell("%tfos_runs").success


@pytest.mark.slow
def test_input_mode_spark_feeds_a_connect_dataframe_exactly_once_per_epoch(connect_spark):
    df = connect_spark.range(0, 600, 1, 4).selectExpr("id", "id * 2 as x")
    run = Run(connect_spark, dataset_ids_per_epoch, {"epochs": 2}, 2, input_mode="spark").start()
    run.wait_for_reservations(120)
    summary = run.train(df, num_epochs=2)
    assert summary.epochs == 2 and summary.rows == 1200 and not summary.stopped_early
    run.wait(180)
    for epoch in range(2):
        ids = sorted(i for epochs in run.results.values() for i in epochs[epoch])
        assert ids == list(range(600)), f"epoch {epoch}: rows missing or repeated"


def run_notebook(name: str, work_dir: Path, remote: str, monkeypatch) -> dict:
    env = {"TFOS_EPOCHS": "3", "TFOS_MONITOR": "text", "TFOS_WORK_DIR": str(work_dir), "TFOS_SPARK_REMOTE": remote}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    finally:
        nbformat.write(nb, work_dir / name.replace(".ipynb", ".executed.ipynb"))
    return json.loads((work_dir / name.replace(".ipynb", ".json")).read_text())


@pytest.mark.slow
def test_example_notebooks_01_and_06_run_on_spark_connect(connect_server, tmp_path, monkeypatch):
    summary = run_notebook("01_train_digits.ipynb", tmp_path, connect_server.url, monkeypatch)
    assert summary["accuracy"] >= 0.9, summary
    assert (Path(summary["exported_model"]) / "saved_model.pb").exists()
    assert list(Path(summary["tensorboard_logdir"]).glob("*/chief_0/**/events.out.tfevents.*"))  # <logdir>/<run id>/chief_0
    summary = run_notebook("06_distributor_style.ipynb", tmp_path, connect_server.url, monkeypatch)
    assert summary["accuracy"] >= 0.9 and summary["workers"] == ["worker:0", "worker:1"], summary
    assert os.path.exists(tmp_path / "06_distributor_style.json")


CHECKPOINTED_CELL = '''
import tensorflow as tf
x, y = load_digits_arrays()
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = build_model()

class Report(tf.keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        ctx.report(int(self.model.optimizer.iterations.numpy()), loss=float(logs["loss"]))

ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(64)
model.fit(ds, epochs=args.epochs, steps_per_epoch=10, verbose=0,
          callbacks=ctx.callbacks(backup=False) + [Report()])
'''


@pytest.mark.slow
def test_the_runs_registry_and_tfos_evaluate_follow_a_connect_run(ip, connect_spark, tmp_path):
    """What the sidebar and %%tfos_evaluate read works for a run on a Connect session: its registry
    record (state, nodes, curve, TensorBoard through the proxy) and an evaluation of its checkpoints
    in the same TensorBoard, entered in the registry beside it."""
    from tfos_notebook.state import registry

    ip.run_cell(TRAINING_HELPERS)
    cell = (f"%%tfos_train --workers 2 --epochs 3 --name connrun --monitor text --model-dir {tmp_path / 'model'}\n"
            f"{CHECKPOINTED_CELL}")
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    run = ip.user_ns["connrun"]
    run.wait(300)
    record = registry.get_run("connrun")
    assert (record.state, record.num_nodes, record.kind) == ("finished", 2, "training")
    assert record.curve and record.tensorboard_url and record.eval_dir
    ip.run_cell("x_eval, y_eval = load_digits_arrays()")
    evaluation = ip.run_cell("%%tfos_evaluate connrun --every 0.2 --settle 0\n"
                             "model = checkpoint.restore(build_model())\n"
                             "loss, accuracy = model.evaluate(x_eval, y_eval, verbose=0)\n"
                             "return {'loss': loss, 'accuracy': accuracy}")
    assert evaluation.success, evaluation.error_in_exec
    points = evaluation.result.wait(120)
    assert [step for step, _ in points] == [1, 2, 3] and points[-1][1]["accuracy"] > 0.5
    entry = registry.get_run(f"{record.run_id}-eval")
    assert (entry.kind, entry.parent, entry.state, entry.step) == ("evaluation", record.run_id, "finished", 3)
    assert list(Path(record.eval_dir).glob("events.out.tfevents.*"))  # the run's TensorBoard shows it as run eval


LOGGING_CELL = '''
import mlflow
for step in range(3):
    ctx.report(step, loss=1.0 / (step + 1))
mlflow.log_metric("logged_by", 10 * ctx.executor_id + 1, step=1)   # on every node: the chief's counts
return {"accuracy": 0.5}
'''


def test_a_run_on_a_connect_session_is_one_mlflow_run_logged_by_the_driver(ip, connect_spark, sqlite_tracking):
    import mlflow

    result = ip.run_cell(f"%%tfos_train --workers 2 --mlflow connect --name logged --monitor none --no-tensorboard "
                         f"--wait\n{LOGGING_CELL}")
    assert result.success, result.error_in_exec
    run = ip.user_ns["logged"].run
    assert run.backend.kind == "connect"
    (logged,) = mlflow.search_runs(experiment_names=["connect"], output_format="list")
    assert (logged.info.status, logged.data.params["workers"], logged.data.tags["tfos.run_id"]) == (
        "FINISHED", "2", run.run_id)
    client = mlflow.MlflowClient()
    assert [m.step for m in client.get_metric_history(logged.info.run_id, "loss")] == [0, 1, 2]
    assert logged.data.metrics["logged_by"] == 1.0 and logged.data.metrics["accuracy"] == 0.5
    for node in ("chief_0", "worker_0"):
        assert client.get_metric_history(logged.info.run_id, f"system/{node}/cpu_utilization_percentage")
