"""``show_tensorboard`` (what ``%tfos_tensorboard LOGDIR`` does) for a log directory behind a URI."""

import os

import psutil
from tbhelpers import scalar_record, version_record, wait_for_scalars

from tfos_notebook.notebook import KernelRuns, TensorBoardPanel, show_tensorboard
from tfos_notebook.tensorboard import process


def test_a_logdir_uri_is_mirrored_live_reused_and_its_tensorboard_ends_on_stop(local_spark, tmp_path,
                                                                                stop_tensorboards):
    events = tmp_path / "logs" / "eval" / "events.out.tfevents.1.host"
    events.parent.mkdir(parents=True)
    events.write_bytes(version_record(1e9) + scalar_record("accuracy", 0.5, 1, 1e9 + 1))
    uri = f"file://{tmp_path}/logs"
    runs, said = KernelRuns(), []

    panel = show_tensorboard(runs, uri, display="widget", say=said.append)
    board = runs.boards[uri]
    assert isinstance(panel, TensorBoardPanel) and panel.url == board.url
    assert board.mirror.root.startswith(os.path.realpath(process.state_dir()))  # a mirror, not the source
    assert [p[2] for p in wait_for_scalars(board.port, "eval", "accuracy", 1)] == [0.5]
    with open(events, "ab") as f:
        f.write(scalar_record("accuracy", 0.75, 2, 1e9 + 2))
    assert [p[2] for p in wait_for_scalars(board.port, "eval", "accuracy", 2)] == [0.5, 0.75]

    assert show_tensorboard(runs, uri + "/", display="text", say=said.append) is None
    assert said == [f"[tfos] TensorBoard of {uri}/ at {board.url}"]
    assert [b.pid for b in process.running()] == [board.pid]  # the same TensorBoard

    tensorboards = [psutil.Process(board.pid), *psutil.Process(board.pid).children(recursive=True)]
    show_tensorboard(runs, uri, stop=True, say=said.append)
    assert said[-1] == f"[tfos] TensorBoard of {uri} stopped"
    _gone, alive = psutil.wait_procs(tensorboards, timeout=0)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == [] and process.running() == []
    assert uri not in runs.boards
