"""%%tfos_train, %tfos_status and %tfos_stop through IPython, on local[2] Spark."""

from __future__ import annotations

import os
import re
import socket
import statistics
import time

import pytest
from nbhelpers import (
    LONG_CELL,
    TRAINING_CELL,
    TRAINING_HELPERS,
    active_jobs_in_group,
    child_processes,
    table_rows,
    wait_until,
)

from tfos_notebook.notebook import CellError, Monitor, TextMonitor, TrainRun
from tfos_notebook.runtime import ConfigError, NodeError, RunStopped
from tfos_notebook.runtime.driver.events import Step


def launch(ip, line: str, body: str):
    """Run ``%%tfos_train line`` + ``body`` as a notebook cell; returns (handle, run_cell result)."""
    result = ip.run_cell(f"%%tfos_train {line}\n{body}")
    return ip.user_ns.get("_"), result


def test_two_worker_training_returns_at_once_and_the_widget_shows_the_finished_run(ip, local_spark):
    ip.run_cell(TRAINING_HELPERS)
    started = time.monotonic()
    result = ip.run_cell(f"%%tfos_train --workers 2 --epochs 3 --name digits --monitor widget\n{TRAINING_CELL}")
    returned_after = time.monotonic() - started
    assert result.success, result.error_in_exec
    run = ip.user_ns["digits"]
    assert isinstance(run, TrainRun) and ip.user_ns["_"] is run
    assert returned_after < 5 and not run.done  # the cell returned while the nodes were starting

    value = run.wait(300)
    assert value["accuracy"] > 0.5 and set(run.results) == {"chief:0", "worker:0"}
    monitor = run.monitor
    assert isinstance(monitor, Monitor)
    assert (monitor.progress.value, monitor.progress.max, monitor.progress_label.value) == (2, 2, "2/2")
    assert "finished" in monitor.header.get_state()["value"]
    rows = table_rows(monitor.tasks.get_state()["value"])
    assert [r[0] for r in rows[1:]] == ["chief:0", "worker:0"]
    for row in rows[1:]:
        task, host, executor, port, gpus, memory, state, step, loss, _rate, _wait = row
        assert (host, executor, state, gpus) == ("127.0.0.1", "driver", "finished", "no GPU")
        assert memory.endswith(" GiB"), memory  # the node's last reading
        assert int(port) > 0 and int(step) == 45 and float(loss) > 0
    assert "[chief:0] trained on chief 0" in monitor.logs.value
    assert monitor.stop_button.disabled


def test_a_second_cell_runs_within_100_ms_while_training(ip, local_spark):
    run, result = launch(ip, "--workers 2 --monitor widget", LONG_CELL)
    assert result.success, result.error_in_exec
    try:
        assert wait_until(lambda: run.events.events(Step), 120)
        timings = []
        for _ in range(20):
            t = time.perf_counter()
            assert ip.run_cell("x = 1 + 1").success
            timings.append(time.perf_counter() - t)
            time.sleep(0.05)
        assert run.state == "running"
        assert statistics.median(timings) < 0.1, timings
    finally:
        run.stop()


def test_a_node_exception_is_reported_at_the_cell_line(ip, local_spark, capsys):
    body = "x = 1\nif ctx.job_name == 'worker':\n    raise ValueError(f'bad digits {x}')\nreturn x\n"
    count = ip.execution_count  # the number the next stored cell gets
    result = ip.run_cell(f"%%tfos_train --workers 2 --monitor text --wait\n{body}", store_history=True)
    error = result.error_in_exec
    assert isinstance(error, NodeError) and (error.role, error.index) == ("worker", 0)
    lines = str(error).splitlines()
    assert lines[0] == f"the function failed on worker:0 on {socket.gethostname()} (127.0.0.1):"
    assert lines[1:] == ["Traceback (most recent call last):",
                         f'  File "<tfos_train In[{count}]>", line 4, in tfos_train_cell',
                         "    raise ValueError(f'bad digits {x}')",
                         "ValueError: bad digits 1"]
    out = capsys.readouterr().out
    assert "NodeError: the function failed on worker:0" in out
    assert "magics.py" not in out  # shown as a message, not as a traceback through the magic
    assert "failed after" in out and "ValueError: bad digits 1" in out


def test_syntax_error_is_reported_against_the_cell_before_launch(ip, local_spark, capsys):
    runs = ip.magics_manager.registry["TFOSMagics"].runs
    launched = len(runs)
    result = ip.run_cell("%%tfos_train --workers 2\nimport os\nfor i in range(3)\n    print(i)\n")
    assert isinstance(result.error_in_exec, CellError) and result.error_in_exec.line == 3
    assert "CellError: syntax error in the cell at line 3: expected ':'" in capsys.readouterr().out
    assert len(runs) == launched


def test_names_that_cannot_be_shipped_are_refused_before_launch_by_name(spark_ns):
    ip = spark_ns
    ip.run_cell("import threading, numpy\nstats_lock = threading.Lock()\nbig_table = numpy.zeros(7 << 20)\n"
                "events_df = spark_for_test.range(10)")
    cases = {
        "with stats_lock:\n    pass": "the cell uses 'stats_lock' (lock), which cannot be shipped",
        "return big_table.sum()": "the cell uses 'big_table', which is over 50 MB pickled",
        "return events_df.count()": "the cell uses 'events_df', a Spark DataFrame: it lives on the driver",
        "return undefined_helper()": "names defined nowhere in the notebook: 'undefined_helper' (line 2)",
    }
    for body, message in cases.items():
        result = ip.run_cell(f"%%tfos_train --workers 2\n{body}\n")
        assert isinstance(result.error_in_exec, CellError), body
        assert message in str(result.error_in_exec)


def test_stop_button_mid_training_stops_the_run_and_leaves_no_process(ip, local_spark):
    run, _ = launch(ip, "--workers 2 --monitor widget", LONG_CELL)
    assert wait_until(lambda: len(child_processes(run.run_id)) == 2 and run.events.events(Step), 120)
    run.monitor.stop_button.click()
    with pytest.raises(RunStopped):
        run.wait(60)
    assert run.state == "stopped"
    assert wait_until(lambda: "stopped" in run.monitor.header.value, 5)
    assert run.monitor.stop_button.description == "Stopped"
    assert wait_until(lambda: not child_processes(run.run_id), 10), child_processes(run.run_id)
    assert active_jobs_in_group(local_spark.sparkContext, run.run.job_group) == []


def test_tfos_stop_and_tfos_status_act_on_this_kernels_runs(ip, local_spark, capsys):
    run, _ = launch(ip, "--workers 2 --name long_run --monitor none", LONG_CELL)
    assert wait_until(lambda: run.state == "running", 120)
    ip.run_line_magic("tfos_status", "")
    assert re.search(r"long_run\s+\S+\s+running .*chief:0 (registered|running)", capsys.readouterr().out)
    ip.run_line_magic("tfos_stop", "long_run")
    assert run.state == "stopped" and "run long_run stopped" in capsys.readouterr().out
    assert wait_until(lambda: not child_processes(run.run_id), 10)
    ip.run_line_magic("tfos_status", "")
    assert re.search(r"long_run\s+\S+\s+stopped", capsys.readouterr().out)
    result = ip.run_cell("%tfos_stop no_such_run")
    assert isinstance(result.error_in_exec, ConfigError) and "no run named 'no_such_run'" in str(result.error_in_exec)


def test_text_monitor_prints_progress_into_the_cell(ip, local_spark, capsys):
    body = "import time\nfor i in range(30):\n    ctx.report(i, loss=0.5)\n    time.sleep(0.05)\nreturn 'done'\n"
    run, _ = launch(ip, "--workers 2 --monitor text --name text_run", body)
    assert isinstance(run.monitor, TextMonitor)
    assert run.wait(120) == "done"
    out = capsys.readouterr().out
    assert "[tfos] text_run: launching 2 nodes (chief:0, worker:0)" in out
    assert "[tfos] text_run: reserved 2/2" in out
    assert re.search(r"\[tfos\] text_run: finished in 0:\d\d \(step 29  loss 0.5\); result: 'done'", out)
    assert len([line for line in out.splitlines() if ": step " in line]) <= 2


def test_local_mode_runs_the_cell_once_here_as_chief(ip):
    result = ip.run_cell("%%tfos_train --local --epochs 3\nreturn ctx.job_name, ctx.num_workers, args.epochs\n")
    assert result.result == ("chief", 1, 3)


def test_options_are_checked_before_launch(spark_ns):
    ip = spark_ns
    ip.run_cell("model = 'my model'\nrows = [1, 2]\nframe = spark_for_test.range(4)")
    cases = {
        "--name model": "--name model would replace the notebook variable 'model' (str)",
        "--input-mode spark": "--input-mode spark needs --data VAR",
        "--input-mode spark --data nothing_here": "--data nothing_here: there is no variable 'nothing_here'",
        "--input-mode spark --data rows": "--data rows: 'rows' is a list, not a Spark DataFrame or RDD",
        "--data frame": "--data is fed only with --input-mode spark",
        "--workers 0": "--workers must be at least 1",
    }
    for line, message in cases.items():
        result = ip.run_cell(f"%%tfos_train {line}\nreturn 1\n")
        assert isinstance(result.error_in_exec, ConfigError), line
        assert message in str(result.error_in_exec), line


def test_input_mode_spark_feeds_the_data_variable_every_epoch(spark_ns):
    ip = spark_ns
    ip.run_cell("frame = spark_for_test.range(0, 500, numPartitions=4).selectExpr('id', 'cast(id * 2 as double) as x')")
    result = ip.run_cell(
        "%%tfos_train --workers 1 --input-mode spark --data frame --epochs 3 --monitor none --no-tensorboard "
        "--name fed\n"
        "seen, total = 0, 0\n"
        "for epoch in range(args.epochs):\n"
        "    for batch in ctx.dataset(64, features='x'):\n"
        "        seen += int(batch.shape[0])\n"
        "        total += int(batch.numpy().sum())\n"
        "return seen, total\n")
    assert result.success, result.error_in_exec
    seen, total = ip.user_ns["fed"].wait(300)
    assert seen == 3 * 500 and total == 3 * sum(2 * i for i in range(500))


def test_input_mode_spark_with_as_many_slots_as_nodes_feeds_each_node_from_its_own_task(spark_ns, capsys):
    ip = spark_ns  # local[2]: the two nodes hold both slots, none is left for feeding tasks
    ip.run_cell("frame = spark_for_test.range(0, 600, numPartitions=3).selectExpr('cast(id as double) as x')")
    result = ip.run_cell(
        "%%tfos_train --workers 2 --input-mode spark --data frame --epochs 2 --monitor text --no-tensorboard "
        "--name both\n"
        "seen, total = 0, 0\n"
        "for epoch in range(args.epochs):\n"
        "    for batch in ctx.dataset(50, features='x'):\n"
        "        seen += int(batch.shape[0])\n"
        "        total += int(batch.numpy().sum())\n"
        "return seen, total\n")
    assert result.success, result.error_in_exec
    run = ip.user_ns["both"]
    run.wait(300)
    seen = [v[0] for v in run.results.values()]
    totals = [v[1] for v in run.results.values()]
    assert sum(seen) == 2 * 600 and sum(totals) == 2 * sum(range(600)) and all(seen)
    assert "feeding in-stage: each node's own task feeds it its partition" in capsys.readouterr().out


def test_help_lists_every_option(ip):
    doc = ip.find_cell_magic("tfos_train").__doc__
    for option in ("--workers", "--ps", "--evaluator", "--input-mode", "--data", "--epochs", "--gpus", "--logdir",
                   "--model-dir", "--name", "--reservation-timeout", "--wait", "--local", "--monitor", "--no-tensorboard",
                   "--mlflow", "--no-mlflow"):
        assert option in doc


def test_tfos_config_lists_and_sets_the_kernels_settings(ip, capsys, monkeypatch):
    monkeypatch.delenv("TFOS_MLFLOW", raising=False)
    monkeypatch.setenv("TFOS_MONITOR", "text")
    ip.run_line_magic("tfos_config", "")
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [["mlflow", "auto"], ["monitor", "text"]]
    assert lines[1].startswith("monitor  text (TFOS_MONITOR)")
    ip.run_line_magic("tfos_config", "mlflow OFF")
    assert capsys.readouterr().out == "[tfos] mlflow = off for the runs this kernel starts (TFOS_MLFLOW=off)\n"
    assert os.environ["TFOS_MLFLOW"] == "off"
    for line, message in (("mlflow sometimes", "mlflow takes auto, on, off, not 'sometimes'"),
                          ("colour blue", "no setting 'colour': the settings are mlflow, monitor"),
                          ("mlflow", "%tfos_config mlflow needs a value, e.g. %tfos_config mlflow off")):
        result = ip.run_cell(f"%tfos_config {line}")
        assert isinstance(result.error_in_exec, ConfigError) and str(result.error_in_exec) == message
