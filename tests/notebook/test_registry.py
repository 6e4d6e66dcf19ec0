"""The runs registry: records of real runs, read from other processes, crash-safe, bounded, and
stop requests carried out by the owning kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace

import psutil
import pytest
from nbhelpers import LONG_CELL, child_processes, wait_until

from tfos_notebook.notebook.tracker import track
from tfos_notebook.runtime import ConfigError
from tfos_notebook.state import registry
from tfos_notebook.state.files import write_json_atomic

LIST_FROM_ANOTHER_PROCESS = (
    "import json; from tfos_notebook.state import registry; "
    "print(json.dumps([r.to_json() for r in registry.list_runs()]))"
)


def runs_seen_by_another_process() -> list[dict]:
    out = subprocess.run([sys.executable, "-c", LIST_FROM_ANOTHER_PROCESS], capture_output=True, text=True,
                         timeout=60, check=True, env=os.environ.copy())
    return json.loads(out.stdout)


def dead_process() -> tuple[int, float]:
    """The pid and start time of a process that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    created = psutil.Process(proc.pid).create_time()
    proc.wait()
    return proc.pid, created


def a_record(run_id: str, state: str = "running", started_at: float | None = None, **kw) -> registry.RunRecord:
    me = psutil.Process()
    return registry.RunRecord(run_id=run_id, name=kw.pop("name", run_id), state=state, owner_pid=me.pid,
                              owner_create_time=me.create_time(), started_at=started_at or time.time(), **kw)


def put(record: registry.RunRecord) -> None:
    write_json_atomic(os.path.join(registry.registry_dir(), f"{record.run_id}.json"), record.to_json())


def test_a_run_is_listed_for_other_processes_from_reserving_to_finished_with_step_loss_and_tensorboard(
        ip, local_spark):
    body = "import time\nfor i in range(5):\n    ctx.report(i, loss=1.0 / (i + 1))\n    time.sleep(0.2)\nreturn 7\n"
    assert ip.run_cell(f"%%tfos_train --workers 2 --name reg_run --monitor none\n{body}").success
    run = ip.user_ns["reg_run"]
    assert wait_until(lambda: registry.get_run("reg_run").state == "running", 60)
    assert run.wait(120) == 7
    assert wait_until(lambda: registry.get_run("reg_run").tensorboard_url is not None, 60)

    [seen] = [r for r in runs_seen_by_another_process() if r["name"] == "reg_run"]
    assert seen["run_id"] == run.run_id and seen["state"] == "finished" and seen["ended_at"] >= seen["started_at"]
    assert seen["roles"] == ["chief:0", "worker:0"] and seen["num_nodes"] == 2
    assert seen["owner_pid"] == os.getpid() and seen["error"] is None
    assert seen["step"] == 4 and seen["loss"] == pytest.approx(0.2)
    board = run.tensorboard
    assert (seen["tensorboard_port"], seen["tensorboard_url"]) == (board.port, board.url)
    assert seen["mirror_dir"] == board.mirror.root and seen["eval_dir"] == os.path.join(board.mirror.root, "eval")

    ip.run_line_magic("tfos_tensorboard", "reg_run --stop")
    assert registry.get_run("reg_run").tensorboard_url is None


def test_tfos_runs_prints_every_kernels_runs_and_marks_a_dead_kernels_run_lost(ip, capsys):
    pid, created = dead_process()
    put(replace(a_record("20261122-000000-aaaaaa", name="orphaned", step=12, loss=0.5), owner_pid=pid,
                owner_create_time=created))
    put(a_record("20261122-000001-bbbbbb", name="mine", state="finished", tensorboard_url="/proxy/6006/"))

    ip.run_line_magic("tfos_runs", "")
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["NAME", "RUN", "ID"]
    lost = next(line for line in out if line.startswith("orphaned")).split()
    assert (lost[2], lost[4], lost[6]) == ("lost", "12", str(pid))
    mine = next(line for line in out if line.startswith("mine"))
    assert " finished " in mine and " here " in mine and mine.endswith("/proxy/6006/")

    ip.run_line_magic("tfos_runs", "--active")
    assert capsys.readouterr().out.strip() == "no runs on this machine yet"


def test_an_unknown_run_is_refused_with_the_runs_there_are(ip):
    put(a_record("20261122-000002-cccccc", name="known", state="failed"))
    with pytest.raises(ConfigError, match=r"no run named 'nope' on this machine; runs: known \(failed\)"):
        registry.get_run("nope")
    with pytest.raises(ConfigError, match="run known already failed: nothing to stop"):
        registry.request_stop("known")
    result = ip.run_cell("%tfos_runs --stop nope")
    assert isinstance(result.error_in_exec, ConfigError)


def test_readers_never_see_half_a_record_while_it_is_rewritten():
    record = a_record("20261122-000003-dddddd", roles=tuple(f"worker:{i}" for i in range(2000)))
    put(record)
    with open(os.path.join(registry.registry_dir(), "garbage.json"), "w") as f:
        f.write('{"run_id": "half')  # what a non-atomic writer would leave; it is skipped
    stop = threading.Event()

    def rewrite() -> None:
        step = 0
        while not stop.is_set():
            step += 1
            put(replace(record, step=step))

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        reads = [registry.list_runs() for _ in range(300)]
    finally:
        stop.set()
        writer.join()
    assert all(len(runs) == 1 and len(runs[0].roles) == 2000 for runs in reads)
    assert len({runs[0].step for runs in reads}) > 1  # the reads did overlap the writes


def test_history_keeps_the_newest_ended_runs_and_every_live_one(local_spark):
    from tfos_notebook import Run

    now = time.time()
    for i in range(registry.MAX_ENDED + 5):
        put(a_record(f"20261122-01{i:04d}-eeeeee", state="finished", started_at=now - 1000 + i))
    put(a_record("20261122-020000-ffffff", state="running", started_at=now - 5000))
    run = Run(local_spark.sparkContext, lambda args, ctx: None, None, 1)
    tracker = track(run)
    tracker.stop()
    runs = registry.list_runs()
    ended = [r for r in runs if r.state == "finished"]
    assert len(ended) == registry.MAX_ENDED and min(r.started_at for r in ended) == now - 1000 + 5
    assert {r.run_id for r in runs if not r.ended} == {"20261122-020000-ffffff", run.run_id}


def test_a_stop_request_from_another_process_stops_the_run_in_its_kernel(ip, local_spark):
    assert ip.run_cell(f"%%tfos_train --workers 2 --name stop_me --monitor none --no-tensorboard\n{LONG_CELL}").success
    run = ip.user_ns["stop_me"]
    assert wait_until(lambda: run.state == "running", 60)
    asked = time.monotonic()
    subprocess.run([sys.executable, "-c", "from tfos_notebook.state import registry; "
                    "registry.request_stop('stop_me')"], check=True, timeout=60, env=os.environ.copy())
    assert wait_until(lambda: registry.get_run("stop_me").state == "stopped", 60)
    assert time.monotonic() - asked < 30
    assert run.state == "stopped" and not child_processes(run.run_id)
    assert not os.path.exists(os.path.join(registry.registry_dir(), f"{run.run_id}.stop"))
