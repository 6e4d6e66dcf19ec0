"""A run's events as its MLflow run gets them, and a node's MLflow calls as the relay sends them:
the runtime's own event and message types, a real MLflow store class, no Spark, no server."""

from __future__ import annotations

import os

import pytest

from tfos_notebook.runtime.driver.events import (
    AttemptEnded,
    GpuStats,
    LaunchSubmitted,
    MlflowCalled,
    ModelExported,
    RunFinished,
    Step,
    SystemStats,
    TensorBoardStarted,
)
from tfos_notebook.runtime.node.child import statuspipe
from tfos_notebook.runtime.node.child.mlflowrelay import CHIEF, MUTED, relay_env
from tfos_notebook.runtime.wire.messages import MlflowCalls, from_json
from tfos_notebook.tracking.fold import RunFold

RUN = "20250101-000000-abcdef"


def chief_step(step: int, t: float, **metrics: float) -> Step:
    return Step(RUN, task=0, role="chief", index=0, step=step, metrics=metrics, t=t)


def points(fold: RunFold, key: str) -> list[tuple[int, float]]:
    return [(p.step, p.value) for p in fold.pending.metrics if p.key == key]


def test_the_chiefs_reports_and_its_autolog_never_draw_the_same_curve_twice():
    fold = RunFold({"workers": "2", "epochs": "3"})
    # ctx.callbacks() reports epoch 1 (step = epoch + 1), then autolog's callback logs the same
    # epoch at step 0 with val_loss, which ctx did not report, and a param of its own
    fold.apply(chief_step(1, 10.0, loss=0.5, accuracy=0.8))
    fold.apply(MlflowCalled(RUN, task=0, role="chief", index=0, metrics=(("loss", 0.5, 10_001, 0),
                                                                          ("val_loss", 0.6, 10_001, 0)),
                            params=(("opt_name", "Adam"), ("epochs", "3"), ("workers", "5")),
                            tags=(("team", "vision"),)))
    fold.apply(chief_step(2, 11.0, loss=0.4, accuracy=0.85))
    assert points(fold, "loss") == [(1, 0.5), (2, 0.4)]
    assert points(fold, "val_loss") == [(0, 0.6)]
    assert fold.pending.params == {"workers": "2", "epochs": "3", "opt_name": "Adam"}  # a param is set once
    assert fold.pending.tags == {"team": "vision"} and fold.last_step == 2


def test_system_samples_count_their_own_steps_per_node():
    fold = RunFold({})
    for t in (1.0, 4.0):
        for role in ("chief", "worker"):
            fold.apply(SystemStats(RUN, task=0, role=role, index=0, cpu_percent=50.0, memory_used_mb=900.0,
                                   memory_percent=12.5, t=t))
    fold.apply(GpuStats(RUN, task=0, role="chief", index=0, host="h", gpus=(("0", 87, 1024, 4096),), t=5.0))
    assert points(fold, "system/worker_0/cpu_utilization_percentage") == [(0, 50.0), (1, 50.0)]
    assert points(fold, "system/chief_0/system_memory_usage_percentage") == [(0, 12.5), (1, 12.5)]
    assert points(fold, "system/chief_0/gpu_0_memory_usage_percentage") == [(2, 25.0)]


def test_the_end_adds_the_chiefs_numbers_the_error_and_the_attempts():
    fold = RunFold({})
    fold.apply(AttemptEnded(RUN, attempt=0, workers=2, cause="decommission", step=51,
                            detail="executor 1 on host-b (nodes worker:0) is decommissioning"))
    fold.apply(LaunchSubmitted(RUN, num_tasks=2, roles=("chief:0", "worker:0"), attempt=1))
    fold.apply(TensorBoardStarted(RUN, url="http://127.0.0.1:6006/"))
    fold.apply(ModelExported(RUN, task=0, role="chief", index=0, path="/m/export", keras="keras2"))
    fold.apply(chief_step(7, 1.0, loss=0.3))
    fold.finish(RunFinished(RUN, state="finished", t=2.0), {"loss": 0.2, "accuracy": 0.9}, dropped=3)
    assert points(fold, "accuracy") == [(7, 0.9)] and points(fold, "final_loss") == [(7, 0.2)]
    assert fold.pending.tags == {"tfos.attempts": "2", "tfos.tensorboard_url": "http://127.0.0.1:6006/",
                                 "tfos.metric_points_dropped": "3", "tfos.attempt.1": (
                                     "decommission, 2 training nodes: executor 1 on host-b (nodes worker:0) is "
                                     "decommissioning; resumed from step 51")}
    assert fold.export.path == "/m/export"
    failed = RunFold({})
    failed.finish(RunFinished(RUN, state="failed", error="NodeError: the function failed on worker:0"), None)
    assert failed.pending.tags == {"tfos.error": "NodeError: the function failed on worker:0"}


def test_a_nodes_mlflow_points_at_the_relay_without_credentials():
    env = {"MLFLOW_TRACKING_URI": "databricks", "MLFLOW_TRACKING_TOKEN": "t", "MLFLOW_TRACKING_USERNAME": "u",
           "MLFLOW_TRACKING_PASSWORD": "p", "PATH": "/bin"}
    relay_env(env, RUN, chief=True)
    assert env == {"MLFLOW_TRACKING_URI": CHIEF, "MLFLOW_RUN_ID": RUN, "PATH": "/bin",
                   "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING": "false"}
    relay_env(env, RUN, chief=False)
    assert env["MLFLOW_TRACKING_URI"] == MUTED


@pytest.fixture
def node_process(monkeypatch):
    """This process as a node's child: a status pipe, and MLflow pointed at the relay (as relay_env does)."""
    read_fd, write_fd = os.pipe()
    monkeypatch.setattr(statuspipe, "_pipe", statuspipe.StatusPipe(write_fd))
    monkeypatch.setenv("MLFLOW_RUN_ID", RUN)
    yield os.fdopen(read_fd, "rb")
    os.close(write_fd)


def relayed(pipe, n: int) -> list[MlflowCalls]:
    return [from_json(pipe.readline()) for _ in range(n)]


def test_every_run_a_node_starts_is_the_drivers_run_and_only_the_chiefs_calls_leave_it(node_process):
    import mlflow
    from mlflow import MlflowClient

    from tfos_notebook.runtime.node.child.relaystore import MAX_PER_LINE

    chief = MlflowClient(CHIEF)
    run = chief.create_run("0", run_name="per-node run")  # what autolog or start_run(nested=True) asks for
    assert run.info.run_id == RUN and chief.get_run("anything").info.run_id == RUN
    chief.log_batch(RUN, metrics=[mlflow.entities.Metric("loss", 0.5, 1000, 3)],
                    params=[mlflow.entities.Param("lr", "0.01")],
                    tags=[mlflow.entities.RunTag("mlflow.source.name", "child.py"), mlflow.entities.RunTag("k", "v")])
    chief.log_batch(RUN, metrics=[mlflow.entities.Metric(f"m{i}", i, 1000, 0) for i in range(MAX_PER_LINE + 1)])
    chief.set_terminated(RUN, "FINISHED")  # the driver ends the run: nothing is sent
    MlflowClient(MUTED).log_batch(RUN, metrics=[mlflow.entities.Metric("loss", 9.9, 1000, 3)])
    first, *chunks = relayed(node_process, 3)
    assert first == MlflowCalls(metrics=(("loss", 0.5, 1000, 3),), params=(("lr", "0.01"),), tags=(("k", "v"),))
    assert [len(c.metrics) for c in chunks] == [MAX_PER_LINE, 1]
    with pytest.raises(mlflow.exceptions.MlflowException, match="deleting a run is not available on a node"):
        chief.delete_run(RUN)


def test_autolog_on_a_node_logs_into_the_one_run_and_drops_the_nodes_model_files(node_process, monkeypatch, caplog):
    import mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", CHIEF)
    with mlflow.start_run() as active:  # what autolog's managed run does, given MLFLOW_RUN_ID
        mlflow.log_params({"epochs": 3})
        model = mlflow.initialize_logged_model("model")
        mlflow.log_text("summary", "model_summary.txt")
    assert active.info.run_id == RUN and model.model_id.startswith("m-")
    assert relayed(node_process, 1) == [MlflowCalls(params=(("epochs", "3"),))]
    assert "artifacts logged to MLflow on a node are dropped" in caplog.text


def test_the_keras_the_nodes_run_is_a_tag_of_the_run():
    from tfos_notebook.runtime.driver.events import Registered

    fold = RunFold({})
    for task, role in ((0, "chief"), (1, "worker")):
        fold.apply(Registered(RUN, task=task, role=role, index=0, host="h", executor_id=str(task), port=1, pid=1,
                              keras="tf-keras 2.16.0"))
    assert fold.pending.tags == {"tfos.keras": "tf-keras 2.16.0"}
