"""A sweep on the real standalone cluster (two workers, four task slots for this application):
without ``parallel``, the sweep packs as many two-node trials as the slots hold, two, and a new
trial starts as soon as one ends, each trial's nodes holding GPUs of their own from Spark's task
resources (the cluster's fake ones); pruning and a failing trial as on local Spark."""

from __future__ import annotations

import optuna
from procs import child_processes
from test_sweep_local import BASE, most_at_once

import tfos_notebook
from tfos_notebook.examples.sweep_trial import SPACE, trial
from tfos_notebook.runtime.driver.events import Registered
from tfos_notebook.runtime.driver.spark import backend_for
from tfos_notebook.search.events import TrialEnded


def test_six_trials_pack_two_at_once_onto_four_slots(two_gpu_tasks_standalone, tmp_path):
    assert backend_for(two_gpu_tasks_standalone).cluster().total_slots == 4
    storage = f"sqlite:///{tmp_path}/study.db"
    study = optuna.create_study(study_name="packed", storage=storage)
    for p in ({"lr": 0.02, "optimizer": "adam"}, {"lr": 0.005, "optimizer": "adam"},
              {"lr": 0.0001, "optimizer": "sgd"}, {"lr": 0.5, "optimizer": "adam"},
              {"lr": 0.01, "optimizer": "adam"}, {"lr": 0.011, "optimizer": "adam"}):
        study.enqueue_trial(p)
    handle = tfos_notebook.sweep(trial, SPACE, trials=6, workers=2, name="packed", storage=storage, args=BASE,
                                 spark=two_gpu_tasks_standalone, monitor="none", tensorboard=False, gpus_per_node=2)
    best = handle.wait(300)
    events = handle.sweep.events.events()
    states = {e.number: e.state for e in events if isinstance(e, TrialEnded)}
    assert states == {0: "complete", 1: "complete", 2: "pruned", 3: "failed", 4: "complete", 5: "complete"}
    assert best["number"] == 4 and most_at_once(events) == 2
    assert all(child_processes(run.run_id) == [] for run in handle.trials.values())
    # The first two trials ran at once: their four nodes hold four different pairs of the cluster's
    # (fake) GPUs, from Spark's task resources, as any run's nodes do.
    held = [(e.executor_id, e.gpus) for n in (0, 1) for e in handle.trials[n].events.events(Registered)]
    assert len(held) == 4 and len(set(held)) == 4 and all(len(gpus) == 2 for _, gpus in held)


def test_keras_trials_under_multiworker_strategy_are_ranked_by_the_accuracy_they_report(two_gpu_tasks_standalone,
                                                                                       tmp_path):
    """Real TensorFlow: two trials of a tf-keras MultiWorkerMirroredStrategy job at once, each ranked by
    the accuracy its chief reports from Keras's logs and returns."""
    from tfos_notebook.examples.digits import DigitsArgs, train

    handle = tfos_notebook.sweep(train, {"learning_rate": [0.3, 0.0001]}, trials=2, workers=2, metric="accuracy",
                                 direction="maximize", sampler="grid", pruner="none", name="digits-lr",
                                 storage=f"sqlite:///{tmp_path}/study.db", args=DigitsArgs(epochs=2),
                                 model_dir=str(tmp_path / "model"), spark=two_gpu_tasks_standalone, monitor="none",
                                 tensorboard=False)
    best = handle.wait(600)
    events = handle.sweep.events.events()
    ended = {e.params["learning_rate"]: e for e in events if isinstance(e, TrialEnded)}
    assert {lr: e.state for lr, e in ended.items()} == {0.3: "complete", 0.0001: "complete"}
    assert best["params"] == {"learning_rate": 0.3} and best["value"] > ended[0.0001].value
    assert most_at_once(events) == 2
    results = {run.args.learning_rate: run.result for run in handle.trials.values()}
    assert best["value"] == results[0.3]["accuracy"]  # the returned value is the trial's final value
    assert all((tmp_path / "model" / f"trial-{n:03d}" / "ckpt.index").exists() for n in handle.trials)
