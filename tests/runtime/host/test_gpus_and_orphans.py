"""GPU holders and leftover processes.

No GPU exists on this machine: the nvidia-smi outputs below are recorded text in the documented
CSV format, and the GPU attribution tests hand scan_host a list of GPU processes instead of asking
NVML. Everything else (processes, environments, kills, Spark jobs) is real.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
import time

import psutil
import pytest
from procs import eventually

from tfos_notebook.runtime.driver.diagnosis.diagnose import ExecutorInfo, Snapshot, diagnose
from tfos_notebook.runtime.driver.events.finding import BLOCKER, WARNING
from tfos_notebook.runtime.host.gpus import GpuProcess, parse_compute_apps, parse_gpu_index
from tfos_notebook.runtime.host.orphans import Leftover, kill_attempts_before, scan_host

INDEX_CSV = "0, GPU-8a1f\n1, GPU-77c2\n"
APPS_CSV = "GPU-8a1f, 4242, 30512\nGPU-77c2, 5151, 1024\nGPU-77c2, 6161, [N/A]\n"

pytestmark = pytest.mark.hostwide  # its leftovers must not meet another test's cleanup --kill


def test_nvidia_smi_csv_is_parsed_by_column_not_by_word_position():
    index = parse_gpu_index(INDEX_CSV)
    assert index == {"GPU-8a1f": "0", "GPU-77c2": "1"}
    assert parse_compute_apps(APPS_CSV, index) == [
        GpuProcess("0", "GPU-8a1f", 4242, 30512), GpuProcess("1", "GPU-77c2", 5151, 1024)]


def _sleeper(env_extra: dict[str, str] | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("TFOS_RUN_ID", "TFOS_TASK")}
    env.update(env_extra or {})
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env)


def test_a_process_of_a_run_with_no_live_node_is_a_leftover_and_can_be_killed():
    orphan = _sleeper({"TFOS_RUN_ID": "20260101-000000-dead01", "TFOS_TASK": "worker:1"})
    active = _sleeper({"TFOS_RUN_ID": "20260101-000000-live01", "TFOS_TASK": "chief:0"})
    try:
        time.sleep(0.3)
        found = [x for x in scan_host(exclude_runs={"20260101-000000-live01"}, gpu_holders=[])
                 if x.run_id in ("20260101-000000-dead01", "20260101-000000-live01")]
        assert [(x.pid, x.run_id, x.task) for x in found] == [(orphan.pid, "20260101-000000-dead01", "worker:1")]
        killed = [x for x in scan_host(exclude_runs={"20260101-000000-live01"}, kill=True, gpu_holders=[])
                  if x.run_id == "20260101-000000-dead01"]
        assert killed[0].killed
        assert orphan.wait(5) is not None
        assert active.poll() is None
    finally:
        for p in (orphan, active):
            p.kill()
            p.wait()


def test_a_node_is_recorded_before_its_child_exists_so_a_concurrent_cleanup_leaves_it_alone(monkeypatch):
    """Another notebook's ``cleanup(kill=True)`` scans the whole host: a child seen before its node
    recorded the run would be killed as a leftover (once seen: a test's scan killed a node's child
    in the moment between its start and its record)."""
    from tfos_notebook.runtime.host.orphans import _live_runs
    from tfos_notebook.runtime.node.task import task as node_task
    from tfos_notebook.runtime.wire.plan import NodePlan

    run_id = f"20260102-000000-{os.getpid():06x}"
    plan = NodePlan(run_id, "127.0.0.1", 1, b"s", None, None, [("chief", 0)], "file:///", "/tmp")
    node = node_task._Node(plan, 0, [])
    try:
        assert run_id in _live_runs()
        # what scan_host(kill=True) would kill; not killing here, where other tests' processes run
        assert not [x for x in scan_host(gpu_holders=[]) if x.run_id == run_id]
        assert node.proc.poll() is None
    finally:
        node.close()
    assert run_id not in _live_runs()

    seen = []

    def spawn_fails(*args):
        seen.append(run_id in _live_runs())
        raise OSError("no more processes")

    monkeypatch.setattr(node_task, "start_child", spawn_fails)
    workdirs = set(glob.glob(os.path.join(tempfile.gettempdir(), f"tfos-{run_id}-0-*")))
    with pytest.raises(OSError):
        node_task._Node(plan, 0, [])
    assert seen == [True] and run_id not in _live_runs()  # recorded before the spawn, forgotten after it failed
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), f"tfos-{run_id}-0-*"))) == workdirs  # nor left its folder


def test_a_relaunch_kills_what_earlier_attempts_of_its_run_left_on_the_host_and_nothing_else():
    run_id = "20260101-000000-retry1"
    lost = _sleeper({"TFOS_RUN_ID": run_id, "TFOS_TASK": "chief:0", "TFOS_ATTEMPT": "0"})
    current = _sleeper({"TFOS_RUN_ID": run_id, "TFOS_TASK": "worker:0", "TFOS_ATTEMPT": "1"})
    other_run = _sleeper({"TFOS_RUN_ID": "20260101-000000-other1", "TFOS_TASK": "chief:0", "TFOS_ATTEMPT": "0"})
    try:
        time.sleep(0.3)
        assert kill_attempts_before(run_id, 1) == [lost.pid]
        assert lost.wait(5) is not None
        assert current.poll() is None and other_run.poll() is None
    finally:
        for p in (lost, current, other_run):
            p.kill()
            p.wait()


def test_gpu_memory_is_attributed_to_leftovers_and_foreign_processes():
    # simulated GPU processes (no GPU here): one of our leftovers and one foreign process
    orphan = _sleeper({"TFOS_RUN_ID": "20260101-000000-dead02", "TFOS_TASK": "chief:0"})
    foreign = _sleeper()
    try:
        time.sleep(0.3)
        holders = [GpuProcess("0", "GPU-a", orphan.pid, 30000), GpuProcess("1", "GPU-b", foreign.pid, 2048)]
        found = {x.pid: x for x in scan_host(gpu_holders=holders)}
        assert found[orphan.pid].gpus == ("0",) and found[orphan.pid].run_id == "20260101-000000-dead02"
        assert found[foreign.pid].foreign and found[foreign.pid].used_mib == 2048
    finally:
        for p in (orphan, foreign):
            p.kill()
            p.wait()


EXECUTORS = (ExecutorInfo("0", "h1", 1, ("0",)), ExecutorInfo("1", "h2", 1, ("0",)))


def test_an_orphan_holding_a_gpu_blocks_a_gpu_launch():
    # snapshot with a GPU-holding orphan (no GPU on this machine)
    snap = Snapshot(2, total_slots=2, executors=EXECUTORS, gpus_per_node=1, task_gpus=1, executor_gpus=1,
                    leftovers=(Leftover("h1", 4242, "20260101-run", "chief:0", "python -m ...child", ("0",), 30512),))
    [f] = diagnose(snap)
    assert f.code == "orphan_processes" and f.severity == BLOCKER
    assert "1 process(es) of earlier runs are still alive, 1 of them holding GPU memory" in f.cause
    assert "h1 pid 4242 (run 20260101-run chief:0), holding GPU 0 (30512 MiB)" in f.evidence[0]
    assert "%tfos_cleanup --kill" in f.remedy


def test_a_foreign_gpu_holder_is_a_warning():
    snap = Snapshot(2, total_slots=2, executors=EXECUTORS,
                    leftovers=(Leftover("h2", 999, "", "", "python other_job.py", ("0",), 2048),))
    [f] = diagnose(snap)
    assert f.code == "gpu_held_by_foreign_process" and f.severity == WARNING
    assert "not started by tfos_notebook" in f.evidence[0]


def detach_and_wait(args, ctx):
    import os
    import subprocess
    import sys
    import time

    if ctx.job_name == "worker":
        # a process the user's code starts in a session of its own escapes the node's process group
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        print("detached", flush=True)
    time.sleep(600)
    return os.getpid()


def test_leftover_of_a_run_whose_python_worker_was_killed_is_found_and_killed(standalone):
    from tfos_notebook import Run
    from tfos_notebook.runtime.driver.diagnosis.cleanup import scan_cluster
    from tfos_notebook.runtime.driver.events import Log, Registered

    sc = standalone.sparkContext
    run = Run(sc, detach_and_wait, None, 2, retries=0).start()
    deadline = time.monotonic() + 90
    while not any(e.line == "detached" for e in run.events.events(Log)) and time.monotonic() < deadline:
        time.sleep(0.2)
    [worker] = [e for e in run.events.events(Registered) if e.role == "worker"]
    psutil.Process(worker.pid).kill()  # SIGKILL the worker node's Python worker
    from tfos_notebook import NodeError

    with pytest.raises(NodeError, match="connection closed before it reported a result") as info:
        run.wait(120)
    assert info.value.role == "worker"
    # the node's child, orphaned, removed the work folder its killed node could not (payload, logs)
    folders = os.path.join(tempfile.gettempdir(), f"tfos-{run.run_id}-1-*")
    assert eventually(lambda: not glob.glob(folders), timeout=10), glob.glob(folders)
    # the next launch's nodes report it
    from tfos_notebook.runtime.driver.events import FindingRaised

    probe = Run(sc, lambda a, c: None, None, 2).start()
    probe.wait(120)
    [orphans] = [e.finding for e in probe.events.events(FindingRaised) if e.finding.code == "orphan_processes"]
    assert any(f"run {run.run_id} worker:0" in line for line in orphans.evidence)
    found = [x for x in scan_cluster(sc, timeout=60) if x.run_id == run.run_id]
    assert len(found) == 1 and found[0].task == "worker:0" and "time.sleep(600)" in found[0].cmdline
    killed = [x for x in scan_cluster(sc, kill=True, timeout=60) if x.run_id == run.run_id]
    assert killed and all(x.killed for x in killed)
    assert not psutil.pid_exists(found[0].pid) or psutil.Process(found[0].pid).status() == psutil.STATUS_ZOMBIE
    assert [x for x in scan_cluster(sc, timeout=60) if x.run_id == run.run_id] == []
