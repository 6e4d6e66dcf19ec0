"""%%tfos_sweep through IPython on local[4] Spark: the cell runs as every node of each trial with the
trial's parameters on ``args``; the widget's table and chart; %tfos_status; %tfos_stop and a stop request from
another process (the sidebar's) stop a sweep and its trials."""

from __future__ import annotations

import time

from nbhelpers import table_rows

from tfos_notebook.examples.sweep_trial import trial
from tfos_notebook.notebook.sweepmonitor import SweepMonitor, snapshot_html
from tfos_notebook.notebook.sweeps import SweepRun
from tfos_notebook.state import registry


def test_a_sweep_cell_runs_its_trials_and_the_widget_tables_and_charts_them(ip, local_spark4, capsys):
    ip.user_ns["trial_fn"] = trial
    ip.user_ns["space"] = {"lr": [0.01, 0.02, 0.5], "optimizer": ["adam"], "steps": 4, "step_secs": 0.2,
                           "fail_above": 0.4}
    result = ip.run_cell("%%tfos_sweep --space space --trials 3 --parallel 2 --workers 2 --sampler grid --seed 1 "
                         "--pruner none --name cellsweep --monitor widget --no-tensorboard\n"
                         "assert args.workers == 2 and args.trial in (0, 1, 2)\n"
                         "return trial_fn(args, ctx)")
    assert result.success, result.error_in_exec
    handle = ip.user_ns["cellsweep"]
    assert isinstance(handle, SweepRun) and ip.user_ns["_"] is handle
    best = handle.wait(180)
    assert best["params"]["lr"] == 0.01
    monitor = handle.monitor
    assert isinstance(monitor, SweepMonitor)
    deadline = time.monotonic() + 10
    while "finished" not in monitor.header.value and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "sweep cellsweep: finished" in monitor.header.value and "best loss" in monitor.header.value
    rows = table_rows(monitor.table.value)
    assert rows[0] == ["trial", "fail_above", "lr", "optimizer", "step_secs", "steps", "state", "step", "loss",
                       "best so far"]
    states = {float(r[2]): r[6] for r in rows[1:]}
    assert states == {0.01: "complete", 0.02: "complete", 0.5: "failed"}
    assert monitor.chart.value.count("<polyline") == 2  # the failed trial reported nothing
    assert monitor.stop_button.disabled
    # the ended sweep's static copy, which a saved notebook keeps, hidden while the widget shows
    assert monitor.snapshot_shown and 'class="tfos-snapshot"' in snapshot_html(monitor.view)
    assert f'data-run-id="{handle.run_id}"' in monitor.header.value and "display:none" in monitor.header.value
    ip.run_line_magic("tfos_status", "")
    assert "sweep cellsweep: finished" in capsys.readouterr().out


def test_tfos_stop_and_a_stop_request_from_another_process_stop_a_sweep(ip, local_spark4, capsys):
    ip.user_ns["trial_fn"] = trial
    ip.user_ns["long_space"] = {"lr": (0.001, 0.1, "log"), "optimizer": ["adam"], "steps": 200, "step_secs": 0.1}
    for name, stop in (("stopped_by_magic", lambda h: ip.run_line_magic("tfos_stop", "stopped_by_magic")),
                       ("stopped_from_sidebar", lambda h: registry.request_stop(h.run_id))):
        result = ip.run_cell(f"%%tfos_sweep --space long_space --trials 4 --parallel 2 --name {name} --monitor text "
                             "--no-tensorboard\nreturn trial_fn(args, ctx)")
        assert result.success, result.error_in_exec
        handle = ip.user_ns[name]
        deadline = time.monotonic() + 60
        while len(handle.sweep.live) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        trials = list(handle.trials.values())
        stop(handle)
        deadline = time.monotonic() + 30
        while not handle.done and time.monotonic() < deadline:
            time.sleep(0.2)
        assert handle.state == "stopped" and all(run.state == "stopped" for run in trials)
        assert registry.get_run(name).state == "stopped"
    assert "starting a sweep named stopped_by_magic again resumes it" in capsys.readouterr().out
