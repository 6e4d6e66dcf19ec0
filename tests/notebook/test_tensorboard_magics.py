"""The TensorBoard of a notebook run: the monitor's panel, and ``%tfos_tensorboard`` for runs and log
directories, on local[2] Spark with real TensorBoard processes."""

from __future__ import annotations

import json
import os
import re
import urllib.request

import psutil
from nbhelpers import wait_until

from tfos_notebook.notebook import TensorBoardPanel
from tfos_notebook.runtime import ConfigError
from tfos_notebook.tensorboard import process

# Each node writes three points of its own curve with TensorFlow's summary writer.
SUMMARY_CELL = '''
import tensorflow as tf
with ctx.summary_writer().as_default():
    for step in range(3):
        tf.summary.scalar("loss", 1.0 / (step + 1) + ctx.task_index, step=step)
return ctx.log_dir
'''


def launch(ip, line: str, body: str):
    result = ip.run_cell(f"%%tfos_train {line}\n{body}")
    assert result.success, result.error_in_exec
    return ip.user_ns["_"]


def iframe_src(html: str) -> str:
    found = re.search(r'<iframe class="tfos-tensorboard" data-url="([^"]*)"', html)
    assert found, html
    return found.group(1).replace("&amp;", "&")


def local_url(board) -> str:
    """The board's URL as this machine reaches it (a proxy path names the same port)."""
    assert board.url == f"http://127.0.0.1:{board.port}/" or board.url.endswith(f"proxy/{board.port}/")
    return f"http://127.0.0.1:{board.port}/"


def served_runs(board) -> set[str]:
    try:
        with urllib.request.urlopen(local_url(board) + "data/runs", timeout=5) as r:
            return set(json.loads(r.read()))
    except OSError:
        return set()


def processes_of(board) -> list[psutil.Process]:
    """The TensorBoard process and its children (its data server)."""
    main = psutil.Process(board.pid)
    return [main, *main.children(recursive=True)]


def gone(procs: list[psutil.Process]) -> bool:
    def ended(p: psutil.Process) -> bool:
        try:
            return not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    return all(ended(p) for p in procs)


def test_a_training_cell_shows_a_tensorboard_panel_of_every_nodes_curves_and_its_logdir_serves_later(
        ip, local_spark, tmp_path, capsys):
    logdir = tmp_path / "logs"
    run = launch(ip, f"--workers 2 --monitor widget --logdir {logdir}", SUMMARY_CELL)
    assert run.wait(300) == f"{logdir}/{run.run_id}/chief_0"  # each run writes under --logdir/<run id>
    assert wait_until(lambda: run.tensorboard is not None, 120)
    board = run.tensorboard
    assert iframe_src(run.monitor.tensorboard_panel.frame.value) == board.url == run.tensorboard_url
    assert run.monitor.tensorboard_panel.frame.layout.display == ""
    assert wait_until(lambda: served_runs(board) == {"chief_0", "worker_0"}, 30), served_runs(board)

    # The nodes (on this machine's disk) left their event files under --logdir: serve it directly.
    panel = ip.run_cell(f"%tfos_tensorboard {logdir} --display widget").result
    assert isinstance(panel, TensorBoardPanel)
    served = ip.magics_manager.registry["TFOSMagics"].runs.boards[os.path.realpath(logdir)]
    assert iframe_src(panel.frame.value) == served.url and served.port != board.port
    assert served.mirror.root == os.path.realpath(logdir)
    mine = {f"{run.run_id}/chief_0", f"{run.run_id}/worker_0"}  # the log dir holds runs side by side
    assert wait_until(lambda: served_runs(served) == mine, 30), served_runs(served)
    again = ip.run_cell(f"%tfos_tensorboard {logdir} --display widget").result
    assert again.url == served.url and len(process.running()) == 2  # reused: the run's and this one

    procs = processes_of(served)
    ip.run_line_magic("tfos_tensorboard", f"{logdir} --stop")
    assert gone(procs) and served.stopped
    assert f"[tfos] TensorBoard of {logdir} stopped" in capsys.readouterr().out
    assert run.tensorboard is board  # the run's own TensorBoard stays up after the run


def test_tfos_tensorboard_starts_reuses_and_stops_the_tensorboard_of_a_run_launched_without_one(
        ip, local_spark, capsys):
    run = launch(ip, "--workers 2 --monitor text --name tb_later --no-tensorboard", "return 1\n")
    assert run.wait(120) == 1
    assert run.tensorboard is None and run.tensorboard_url is None and process.running() == []

    ip.run_line_magic("tfos_tensorboard", "tb_later")
    board = run.tensorboard
    out = capsys.readouterr().out
    assert out.count(f"[tfos] tb_later: TensorBoard at {board.url}") == 1  # the run's text monitor, once
    assert f"[tfos] TensorBoard of run tb_later at {board.url}" in out  # this cell
    ip.run_line_magic("tfos_tensorboard", run.run_id)  # by run id: the same TensorBoard
    assert run.tensorboard is board and [b.pid for b in process.running()] == [board.pid]
    assert "tb_later: TensorBoard at" not in capsys.readouterr().out

    procs = processes_of(board)
    ip.run_line_magic("tfos_tensorboard", "tb_later --stop")
    assert gone(procs) and process.running() == []
    assert run.tensorboard is None and run.tensorboard_url is None
    out = capsys.readouterr().out
    assert "[tfos] TensorBoard of run tb_later stopped" in out
    assert "[tfos] tb_later: TensorBoard stopped; %tfos_tensorboard tb_later starts it again" in out
    ip.run_line_magic("tfos_tensorboard", "tb_later --stop")
    assert "[tfos] no TensorBoard is running for run tb_later" in capsys.readouterr().out

    panel = ip.run_line_magic("tfos_tensorboard", "tb_later --display widget")
    assert iframe_src(panel.frame.value) == run.tensorboard_url and run.tensorboard.pid != board.pid
    assert served_runs(run.tensorboard) == set()  # the nodes wrote no event files


def test_tfos_tensorboard_refuses_a_name_that_is_neither_a_run_nor_a_directory(ip, tmp_path):
    result = ip.run_cell(f"%tfos_tensorboard {tmp_path}/missing")
    assert isinstance(result.error_in_exec, ConfigError)
    assert f"'{tmp_path}/missing' is neither a run of this kernel (runs: " in str(result.error_in_exec)
    assert process.running() == []
