import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest
from databricks_shapes import AWS, on_databricks
from tbhelpers import scalar_record, version_record, wait_for_scalars

from tfos_notebook.tensorboard import process, serve_logdir

WORKTREE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _family(pid: int) -> list[psutil.Process]:
    parent = psutil.Process(pid)
    return [parent, *parent.children(recursive=True)]


def _wait_gone(procs: list[psutil.Process], timeout: float = 15.0) -> list[psutil.Process]:
    _gone, alive = psutil.wait_procs(procs, timeout=timeout)
    return alive


def test_tensorboard_serves_scalars_appended_to_its_logdir(tmp_path, stop_tensorboards):
    events = tmp_path / "logs" / "worker_0" / "events.out.tfevents.1.test"
    events.parent.mkdir(parents=True)
    events.write_bytes(version_record(time.time()) + scalar_record("loss", 1.0, 1))
    info = process.start(str(tmp_path / "logs")).info
    assert wait_for_scalars(info.port, "worker_0", "loss", 1)[0][1:] == [1, 1.0]
    with open(events, "ab") as f:  # appended in place, as the mirror does
        f.write(scalar_record("loss", 0.5, 2))
    assert [p[1:] for p in wait_for_scalars(info.port, "worker_0", "loss", 2, timeout=10)] == [[1, 1.0], [2, 0.5]]


def test_a_second_start_on_the_same_logdir_reuses_the_running_tensorboard(tmp_path, stop_tensorboards):
    first = process.start(str(tmp_path))
    second = process.start(str(tmp_path))
    assert isinstance(first, process.StartLaunched) and isinstance(second, process.StartReused)
    assert second.info == first.info
    assert process.running() == [first.info]


def test_stop_ends_tensorboard_and_its_data_server_and_clears_the_registry(tmp_path):
    info = process.start(str(tmp_path)).info
    family = _family(info.pid)
    assert len(family) >= 2, "TensorBoard's data server should run as its child"
    assert os.listdir(process.registry_dir()) and process.find(str(tmp_path)) == info
    assert process.stop(info) is True
    assert _wait_gone(family, timeout=1) == []
    assert process.running() == [] and process.find(str(tmp_path)) is None
    assert process.stop(info) is False


def test_a_registry_entry_whose_process_is_gone_is_dropped(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    entry = {"pid": dead.pid, "port": 1, "logdir": str(tmp_path), "owner_pid": os.getpid(), "started": 0.0,
             "create_time": 0.0, "log_file": ""}
    path = os.path.join(process.registry_dir(), f"{dead.pid}.json")
    with open(path, "w") as f:
        json.dump(entry, f)
    assert process.running() == []
    assert not os.path.exists(path)


def test_on_a_databricks_cluster_tensorboard_listens_for_the_driver_proxy_beside_the_comm_channel(
        tmp_path, monkeypatch, stop_tensorboards):
    # faked: a dedicated AWS cluster's REPL context and runtime version (databricks_shapes.py); the
    # TensorBoard is real, and answers through the URL's port
    on_databricks(monkeypatch, "15.4", AWS)
    board = serve_logdir(str(tmp_path))
    assert 6006 <= board.port <= 6106 and board.port != 6062
    assert board.url == ("https://dbc-f0b05a54-473d.cloud.databricks.com/driver-proxy/o/1018391329803962/"
                         f"0112-220452-osc8oiar/{board.port}/")
    listening = {(c.laddr.ip, c.laddr.port) for p in _family(board.pid)
                 for c in p.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
    assert ("0.0.0.0", board.port) in listening and board.info.host == "0.0.0.0"
    with urllib.request.urlopen(f"http://127.0.0.1:{board.port}/data/runs", timeout=10) as r:
        assert r.status == 200


def test_a_tensorboard_that_cannot_start_is_reported_with_its_log(tmp_path):
    with pytest.raises(process.TensorBoardError, match=r"TensorBoard exited with code \d+ while starting(.|\n)*"
                                                       r"no_such_flag"):
        process.start(str(tmp_path), extra_args=["--no_such_flag"])
    assert process.running() == []


_OWNER = """
import os, sys, time
sys.path.insert(0, {worktree!r})
from tfos_notebook.tensorboard import process
info = process.start({logdir!r}).info
print(info.pid, flush=True)
if sys.argv[1] == "exit":
    sys.exit(0)
time.sleep(600)
"""


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_tensorboard_is_gone_when_the_process_that_started_it_ends(tmp_path, how):
    """A kernel that exits normally stops its TensorBoards at exit; one that is killed (SIGKILL, no
    atexit) takes them with it through the launcher's watchdog."""
    script = _OWNER.format(worktree=WORKTREE, logdir=str(tmp_path))
    owner = subprocess.Popen([sys.executable, "-c", script, how], stdout=subprocess.PIPE, text=True)
    pid = int(owner.stdout.readline())
    family = _family(pid)
    if how == "kill":
        owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=30)
    assert _wait_gone(family) == []
    if how == "exit":  # stopped by its owner at exit, which also cleared its registry entry
        assert [n for n in os.listdir(process.registry_dir()) if n.endswith(".json")] == []
    assert process.running() == []
