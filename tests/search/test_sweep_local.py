"""Sweeps on local Spark: trials are real distributed runs (two nodes each, real processes, the
control channel, the runs registry, a real TensorBoard, MLflow in an SQLite store), two at once
on local[4]. The trials' steps wait rather than compute (``examples/sweep_trial.py``): what is
tested is the sweep, not the two cores of the machine."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import time
import urllib.request

import pytest
from procs import child_processes, child_role, eventually

import tfos_notebook
from tfos_notebook.errors import ConfigError
from tfos_notebook.examples.sweep_trial import SPACE, trial
from tfos_notebook.runtime.driver.errors import PreflightError
from tfos_notebook.runtime.driver.events import FindingRaised
from tfos_notebook.search.events import SweepFinished, TrialEnded, TrialPruned, TrialStarted
from tfos_notebook.state import registry

pytestmark = pytest.mark.skipif(importlib.util.find_spec("optuna") is None,
                                reason="sweeps need Optuna (the sweep extra; Databricks ML runtimes before 16.4 ship none)")

BASE = {"steps": 6, "step_secs": 0.3, "fail_above": 0.4}


def most_at_once(events) -> int:
    """The most trials running at the same time, from the sweep's events."""
    running = most = 0
    for e in events:
        if isinstance(e, TrialStarted):
            running += 1
            most = max(most, running)
        elif isinstance(e, TrialEnded):
            running -= 1
    return most


def stored_study(tmp_path, name: str, params: list[dict]) -> str:
    """An Optuna study of ``name`` with ``params`` queued, so the sweep asks them in this order."""
    import optuna

    storage = f"sqlite:///{tmp_path}/study.db"
    study = optuna.create_study(study_name=name, storage=storage)
    for p in params:
        study.enqueue_trial(p)
    return storage


def test_six_trials_of_two_workers_run_two_at_once_pruned_failed_and_tracked(local_spark4, tmp_path,
                                                                            sqlite_tracking, thread_exceptions):
    # The median pruner compares each report with the finished trials' at the same step: every trial
    # that must finish is better than the first two at every step.
    queued = [{"lr": 0.02, "optimizer": "adam"}, {"lr": 0.005, "optimizer": "adam"},
              {"lr": 0.0001, "optimizer": "sgd"},  # far worse than the first two: the median pruner stops it
              {"lr": 0.5, "optimizer": "adam"},  # raises in its first step
              {"lr": 0.01, "optimizer": "adam"}, {"lr": 0.011, "optimizer": "adam"}]
    storage = stored_study(tmp_path, "six", queued)
    started = time.monotonic()
    handle = tfos_notebook.sweep(trial, SPACE, trials=6, parallel=2, workers=2, name="six", storage=storage,
                                 args=BASE, spark=local_spark4, monitor="none", mlflow=True)
    best = handle.wait(300)
    took = time.monotonic() - started
    events = handle.sweep.events.events()
    ended = {e.number: e for e in events if isinstance(e, TrialEnded)}

    assert best["number"] == 4 and best["params"] == {"lr": 0.01, "optimizer": "adam"}
    assert [ended[n].state for n in range(6)] == ["complete", "complete", "pruned", "failed", "complete", "complete"]
    assert ended[3].error.startswith("the function failed on ") and ended[3].error.endswith("ValueError: lr 0.5 diverged")
    pruned = next(e for e in events if isinstance(e, TrialPruned))
    assert pruned.number == 2 and pruned.step < BASE["steps"]
    assert ended[2].stop_secs < 2.0  # from the pruner's decision to its run's end, slots free
    assert most_at_once(events) == 2
    assert isinstance(events[-1], SweepFinished) and events[-1].state == "finished" and events[-1].best == 4
    assert took < 120  # six trials of about 3 s, two at once (a ceiling against hanging)
    assert all(child_processes(run.run_id) == [] for run in handle.trials.values())

    # the study holds every trial's end; each trial's run is a child of the sweep's MLflow run
    states = [t.state.name for t in handle.study.trials]
    assert states == ["COMPLETE", "COMPLETE", "PRUNED", "FAIL", "COMPLETE", "COMPLETE"]
    assert handle.study.trials[3].user_attrs["error"]
    from mlflow import MlflowClient

    client = MlflowClient(sqlite_tracking)
    parent = handle.sweep.parent
    assert parent.wait(30) and parent.error is None
    runs = client.search_runs([parent.experiment_id])
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.mlflow_run_id]
    assert sorted(r.info.run_name for r in children) == [f"six/trial-{n:03d}" for n in range(6)]
    assert {r.data.params["lr"] for r in children} == {str(p["lr"]) for p in queued}
    top = client.get_run(parent.mlflow_run_id)
    assert top.info.status == "FINISHED" and top.data.params["pruner"] == "median"
    assert top.data.metrics["best_loss"] == pytest.approx(best["value"])
    assert top.data.tags["tfos.sweep.best_trial"] == "4"

    # the registry: the sweep, and each trial as its child
    record = registry.get_run("six")
    assert record.kind == "sweep" and record.state == "finished" and record.metrics["complete"] == 4
    trials = [r for r in registry.list_runs() if r.parent == handle.run_id]
    assert len(trials) == 6 and all(r.kind == "training" for r in trials)

    # one TensorBoard for the sweep, each trial's chief a run of it
    deadline = time.monotonic() + 30
    while True:
        with urllib.request.urlopen(f"http://127.0.0.1:{handle.tensorboard.port}/data/runs", timeout=10) as r:
            board_runs = json.load(r)
        if {f"trial-{n:03d}/chief_0" for n in (0, 1, 4, 5)} <= set(board_runs) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert {f"trial-{n:03d}/chief_0" for n in (0, 1, 4, 5)} <= set(board_runs)


def test_a_stopped_sweep_resumes_from_its_study_with_the_interrupted_trials_first(local_spark4, tmp_path):
    storage = f"sqlite:///{tmp_path}/study.db"
    args = {**BASE, "steps": 30, "step_secs": 0.2}
    first = tfos_notebook.sweep(trial, SPACE, trials=4, parallel=2, workers=2, name="resumable", storage=storage,
                                args=args, spark=local_spark4, monitor="none", tensorboard=False, sampler="random",
                                seed=7, pruner="none")
    deadline = time.monotonic() + 60
    while len(first.sweep.live) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    running = {n: run for n, run in first.trials.items()}
    assert len(running) == 2
    stopped_at = time.monotonic()
    first.stop()
    assert time.monotonic() - stopped_at < 15 and first.state == "stopped"
    assert all(run.state == "stopped" and child_processes(run.run_id) == [] for run in running.values())
    interrupted = {n: first.study.trials[n].params for n in running}

    again = tfos_notebook.sweep(trial, SPACE, trials=4, parallel=2, workers=2, name="resumable", storage=storage,
                                args={**args, "steps": 4}, spark=local_spark4, monitor="none", tensorboard=False,
                                sampler="random", seed=7, pruner="none")
    again.wait(300)
    events = again.sweep.events.events()
    started = [e for e in events if isinstance(e, TrialStarted)]
    assert [e.resumes for e in started[:2]] == sorted(interrupted) or {e.resumes for e in started[:2]} == set(interrupted)
    assert [e.params for e in started[:2]] == [interrupted[e.resumes] for e in started[:2]]
    assert again.state == "finished" and len([e for e in events if isinstance(e, TrialEnded)]) == 4
    told = [t for t in again.study.trials if t.state.name == "COMPLETE"]
    assert len(told) == 4  # the two stopped ones do not count: they ran again


def test_a_finished_sweep_asked_for_more_trials_counts_and_ranks_its_earlier_ones(local_spark4, tmp_path):
    options = {"parallel": 2, "workers": 2, "name": "grown", "storage": f"sqlite:///{tmp_path}/study.db",
               "args": {**BASE, "steps": 3}, "spark": local_spark4, "monitor": "none", "tensorboard": False,
               "sampler": "random", "seed": 3, "pruner": "none"}
    first = tfos_notebook.sweep(trial, SPACE, trials=2, **options)
    first.wait(120)
    again = tfos_notebook.sweep(trial, SPACE, trials=3, **options)
    best = again.wait(120)
    events = again.sweep.events.events()
    assert [e.number for e in events if isinstance(e, TrialEnded) and e.earlier] == [0, 1]
    assert [e.number for e in events if isinstance(e, TrialStarted)] == [2]
    values = {e.number: e.value for e in again.sweep.ended}
    assert sorted(values) == [0, 1, 2] and best["value"] == min(values.values())
    assert registry.get_run("grown").metrics["complete"] == 3


def test_a_trial_whose_node_is_lost_is_failed_with_the_reason_and_the_sweep_goes_on(local_spark4, tmp_path):
    handle = tfos_notebook.sweep(trial, {"lr": [0.01, 0.02], "optimizer": ["adam"]}, trials=2, parallel=2, workers=2,
                                 sampler="grid", seed=1, pruner="none", storage=f"sqlite:///{tmp_path}/study.db",
                                 args={**BASE, "steps": 40, "step_secs": 0.2}, spark=local_spark4, monitor="none",
                                 tensorboard=False, retries=0)
    assert eventually(lambda: len(handle.trials) == 2 and all(child_processes(r.run_id) for r in handle.trials.values()),
                      timeout=60)
    lost = handle.trials[0]
    victim = next(p for p in child_processes(lost.run_id) if child_role(p) == "worker:0")
    os.kill(victim.pid, signal.SIGKILL)  # trial 0's worker dies, and it may not be relaunched (retries=0)
    handle.wait(120)
    ended = {e.number: e for e in handle.sweep.events.events() if isinstance(e, TrialEnded)}
    assert ended[0].state == "failed" and ended[0].error.startswith("the function failed on worker:0")
    assert "SIGKILL" in ended[0].error or "died" in ended[0].error  # as the run tells it (a forked child or not)
    assert ended[1].state == "complete" and handle.state == "finished" and handle.best["number"] == 1


def test_successive_halving_prunes_the_poor_trial_at_its_first_rung(local_spark4, tmp_path):
    # One trial at a time, in a known order: the first sets the rungs (its steps: a rung at step 1,
    # then every 4x), the poor second is below the best at the first rung, the third is the best.
    queued = [{"lr": 0.02, "optimizer": "adam"}, {"lr": 0.0001, "optimizer": "sgd"}, {"lr": 0.01, "optimizer": "adam"}]
    handle = tfos_notebook.sweep(trial, SPACE, trials=3, parallel=1, workers=2, name="asha", pruner="asha",
                                 storage=stored_study(tmp_path, "asha", queued), args=BASE, spark=local_spark4,
                                 monitor="none", tensorboard=False)
    best = handle.wait(120)
    states = [e.state for e in handle.sweep.events.events() if isinstance(e, TrialEnded)]
    assert states == ["complete", "pruned", "complete"] and best["number"] == 2


def test_a_metric_the_chief_never_reports_is_named_at_once_and_ends_the_sweep(local_spark4, tmp_path):
    started = time.monotonic()
    handle = tfos_notebook.sweep(trial, SPACE, trials=4, parallel=2, workers=2, metric="val_loss",
                                 storage=f"sqlite:///{tmp_path}/study.db", args=BASE, spark=local_spark4,
                                 monitor="none", tensorboard=False)
    with pytest.raises(ConfigError) as e:
        handle.wait(120)
    assert "reported loss but not the sweep's metric val_loss" in str(e.value)
    assert "give the sweep metric= one of: loss" in str(e.value)
    finding = next(ev for ev in handle.sweep.events.events() if isinstance(ev, FindingRaised))
    assert finding.finding.code == "sweep_metric_missing" and finding.t - handle.sweep.events.events()[0].t < 10
    assert handle.state == "failed" and time.monotonic() - started < 60
    assert len([ev for ev in handle.sweep.events.events() if isinstance(ev, TrialStarted)]) <= 3


def test_a_trial_that_cannot_fit_the_cluster_is_refused_at_once(local_spark4, tmp_path):
    started = time.monotonic()
    with pytest.raises(PreflightError, match="cannot launch 5 nodes"):
        tfos_notebook.sweep(trial, SPACE, trials=2, workers=5, storage=f"sqlite:///{tmp_path}/study.db",
                            args=BASE, spark=local_spark4, monitor="none", tensorboard=False)
    assert time.monotonic() - started < 15


def fed_trial(args, ctx):
    """InputMode.SPARK: reads its share of the fed rows with TensorFlowOnSpark's DataFeed; the chief
    reports a loss made of the trial's parameter."""
    from tfos_notebook import TFNode

    feed = TFNode.DataFeed(ctx.mgr)
    ids = []
    while not feed.should_stop():
        ids += [row[0] for row in feed.next_batch(100)]
    if ctx.is_chief:
        ctx.report(1, loss=args.lr)
    return ids


def test_trials_fed_from_a_dataframe_each_read_every_row(local_spark4, tmp_path):
    rows = 500
    df = local_spark4.range(0, rows, numPartitions=3)
    handle = tfos_notebook.sweep(fed_trial, {"lr": [0.1, 0.2]}, trials=2, parallel=2, workers=2, sampler="grid",
                                 pruner="none", storage=f"sqlite:///{tmp_path}/study.db", spark=local_spark4,
                                 monitor="none", tensorboard=False, input_mode="spark", data=df)
    best = handle.wait(300)
    assert best["params"] == {"lr": 0.1} and len(handle.trials) == 2
    for run in handle.trials.values():  # each trial was fed the whole frame, shared between its two nodes
        assert sorted(i for ids in run.results.values() for i in ids) == list(range(rows))
