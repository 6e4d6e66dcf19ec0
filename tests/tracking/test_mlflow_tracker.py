"""The tracker against a real ``sqlite:`` MLflow store, fed a run's events by hand (no Spark: the
run is the protocol the tracker reads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tfos_notebook.runtime.driver.events import (
    EventStream,
    LaunchSubmitted,
    MlflowRun,
    RunFinished,
    RunStateChanged,
    Step,
    SystemStats,
)
from tfos_notebook.tracking.mlflowrun import MlflowTracker
from tfos_notebook.tracking.settings import TrackingConfig

RUN = "20250101-000000-abcdef"


class Backend:
    """A Spark backend off Databricks, as far as the tracker reads one."""

    def conf(self, key: str, default: str | None = None) -> str | None:
        return {"spark.app.id": "local-1"}.get(key, default)

    def databricks(self) -> None:
        return None


@dataclass
class FakeRun:
    """What the tracker reads of a run; its events are published by the test."""

    run_id: str = RUN
    name: str = "digits"
    roles: list = field(default_factory=lambda: [("chief", 0), ("worker", 0)])
    input_mode: str = "tensorflow"
    args: Any = field(default_factory=lambda: {"lr": 0.01})
    events: EventStream = field(default_factory=EventStream)
    backend: Backend = field(default_factory=Backend)
    result: Any = None


def track(run: FakeRun, experiment: str | None = None) -> MlflowTracker:
    run.events.publish(RunStateChanged(RUN, state="reserving"))
    return MlflowTracker(run, TrackingConfig(experiment)).start()


def test_a_runs_events_become_one_mlflow_run_ended_with_its_status(sqlite_tracking):
    from mlflow import MlflowClient

    run = FakeRun(result={"accuracy": 0.9})
    tracker = track(run, "fake")
    for step in range(1, 4):
        for role in ("chief", "worker"):
            run.events.publish(Step(RUN, task=0, role=role, index=0, step=step, metrics={"loss": 1.0 / step}))
    run.events.publish(SystemStats(RUN, task=1, role="worker", index=0, cpu_percent=40.0, memory_used_mb=800.0,
                                   memory_percent=10.0))
    run.events.publish(LaunchSubmitted(RUN, num_tasks=2, roles=("chief:0", "worker:0"), attempt=1))
    run.events.publish(RunFinished(RUN, state="stopped", error="RunStopped: run digits was stopped"))
    assert tracker.wait(60)
    client = MlflowClient(sqlite_tracking)
    logged = client.get_run(tracker.mlflow_run_id)
    assert logged.info.experiment_id == client.get_experiment_by_name("fake").experiment_id
    assert (logged.info.status, logged.info.run_name) == ("KILLED", "digits")
    assert logged.data.params == {"workers": "2", "ps": "0", "evaluator": "False", "input_mode": "tensorflow",
                                  "lr": "0.01"}
    assert {k: v for k, v in logged.data.tags.items() if k.startswith("tfos.")} == {
        "tfos.run_id": RUN, "tfos.nodes": "2", "tfos.roles": "chief:0,worker:0", "tfos.input_mode": "tensorflow",
        "tfos.spark_app_id": "local-1", "tfos.attempts": "2", "tfos.error": "RunStopped: run digits was stopped"}
    loss = client.get_metric_history(logged.info.run_id, "loss")  # the chief's only
    assert [m.step for m in loss] == [1, 2, 3] and [m.value for m in loss] == pytest.approx([1.0, 0.5, 1 / 3])
    assert "accuracy" not in logged.data.metrics  # a stopped run's result is not final
    assert logged.data.metrics["system/worker_0/cpu_utilization_percentage"] == 40.0
    published = run.events.events(MlflowRun)
    assert [(e.mlflow_run_id, e.complete, e.error) for e in published] == [
        (tracker.mlflow_run_id, False, ""), (tracker.mlflow_run_id, True, "")]
    assert published[0].tracking_uri == sqlite_tracking and published[0].url == ""


def test_inside_an_active_run_the_tracked_run_is_its_child(sqlite_tracking):
    import mlflow

    with mlflow.start_run(run_name="notebook") as parent:
        tracker = track(FakeRun())
    tracker.run.events.publish(RunFinished(RUN, state="finished"))
    assert tracker.wait(60)
    child = mlflow.MlflowClient().get_run(tracker.mlflow_run_id)
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert (child.info.experiment_id, child.info.status) == (parent.info.experiment_id, "FINISHED")


def test_a_tracking_server_that_cannot_be_reached_is_reported_and_the_run_goes_on(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    run = FakeRun()
    tracker = track(run)
    assert tracker.wait(60) and tracker.mlflow_run_id is None
    problem, complete = run.events.events(MlflowRun)
    assert (problem.complete, complete.complete, problem.error) == (False, True, complete.error)
    assert problem.error.startswith("the MLflow run could not be created: MlflowException: API request to "
                                    "http://127.0.0.1:9/api/2.0/mlflow/")
