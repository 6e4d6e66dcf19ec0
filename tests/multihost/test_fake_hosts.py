"""Runs across fake hosts (Linux namespaces, see ``fakehosts.py``): two worker hosts that share
neither loopback, process table, hostname nor /tmp with each other or with the driver, which runs
in its own namespaces. ``/tmp/shared`` on every host and the driver stands in for shared storage,
and mounts of parts of it at ``/Volumes`` and ``/dbfs`` for Databricks' FUSE mounts (faked: no
Databricks here, only mount points at its paths).

Each test runs a driver program from ``scenarios.py`` and checks what it reports, and what is left
on the hosts. The chaos tests kill a node's process, kill an executor JVM, or cut a host's network
for 60 s in the middle of a run whose checkpoints are on the fake Unity Catalog volume.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from fakehosts import FakeHosts, unavailable_reason, wait_for

from tfos_notebook.runtime.host.procs import kill_process_group
from tfos_notebook.runtime.host.timeouts import Deadline

pytestmark = [pytest.mark.slow, pytest.mark.multihost]

SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scenarios.py")


@pytest.fixture(scope="module")
def hosts():
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with FakeHosts(hosts=2, cores=1) as fh:
        yield fh


def left_on_hosts(hosts: FakeHosts, run_id: str) -> dict[str, list[str]]:
    """Processes of ``run_id`` still running on any host, waiting up to 60 s for them to end."""
    Deadline(60).wait_until(lambda: not hosts.processes(run_id), interval=1.0)
    return hosts.processes(run_id)


def test_a_profile_of_a_run_on_two_hosts_lands_each_node_trace_in_the_driver_mirror_within_s_plus_10(hosts):
    result, _ = wait_for(hosts.driver([SCENARIOS, "profile"]), 400)
    assert result["failures"] == {} and result["seconds"] < 2 + 60, result  # a ceiling against hanging
    assert sorted(result["traces"]) == ["chief_0.xplane.pb", "worker_0.xplane.pb"]
    assert all(size > 1000 for size in result["traces"].values())
    assert [h.split(" ")[0] for h in result["hosts"]] == ["tfos-h1", "tfos-h2"]  # one node on each host


def test_local_dirs_are_told_apart_from_shared_ones_and_dbfs_paths_reach_tensorflow_through_the_mounts(hosts):
    driver = hosts.driver([SCENARIOS, "storage"])
    try:
        line = driver.stdout.readline()
        while line and not line.startswith("UNMOUNT"):  # "" once the driver exited
            line = driver.stdout.readline()
        assert line.startswith("UNMOUNT /dbfs"), f"the storage scenario stopped early:\n{driver.stdout.read()[-4000:]}"
        hosts.set_dbfs("tfos-h2", mounted=False)  # as on compute without FUSE for DBFS root
        driver.stdin.write("go\n")
        driver.stdin.flush()
        result, _ = wait_for(driver, 300)
    finally:
        kill_process_group(driver, grace=5)
        hosts.set_dbfs("tfos-h2", mounted=True)
    nodes = result["results"]
    assert {r["host"] for r in nodes.values()} == {"tfos-h1", "tfos-h2"}  # one node on each host
    # /tmp/model-local is a different directory on each host: nobody resumes from it, and the driver
    # refuses to evaluate it, naming the hosts and the fix
    assert all(r["shared"] is False and r["restored"] is None for r in nodes.values())
    assert len(result["findings"]) == 1 and "tfos-h1 (10.251.0.11)" in result["findings"][0]
    assert "is not shared" in result["findings"][0] and "hdfs://" in result["findings"][0]
    assert "on the chief's own host" in result["evaluate"] and "dbfs:/" in result["evaluate"]
    # a file:// log dir is node-local too: both nodes' event files reached the driver's mirror
    assert {p.split("/")[0] for p in result["mirrored"]} == {"chief_0", "worker_0"}
    # a relative model dir resolves on the driver (its working directory, here shared storage), and
    # the checkpoint is kept there after the run
    relative = result["relative"]
    assert relative["model_dir"] == "/tmp/shared/work/relative-model"
    assert "checkpoint" in relative["kept"] and "model_dir_not_shared" not in relative["findings"]
    assert all(r["shared"] and r["model_dir"] == relative["model_dir"] for r in relative["results"].values())
    # dbfs:/Volumes/... reaches TensorFlow as /Volumes/..., dbfs:/... as /dbfs/...: the chief's
    # checkpoint and both nodes' events are in the shared storage behind the mounts
    dbfs = result["dbfs"]
    run_id = dbfs["log_dir"].rsplit("/", 1)[-1]
    assert dbfs["log_dir"] == f"dbfs:/tfos/logs/{run_id}"
    assert {(r["model_dir"], r["log_dir"], r["shared"]) for r in dbfs["results"].values()} == {
        ("/Volumes/main/tfos/shared/model-dbfs", f"/dbfs/tfos/logs/{run_id}/{node}", True)
        for node in ("chief_0", "worker_0")}
    assert "checkpoint" in dbfs["kept"] and dbfs["events"] == [f"{run_id}/chief_0", f"{run_id}/worker_0"]
    # without /dbfs on one host the run fails at once, naming that host and the fix, and is not retried
    missing = result["no_dbfs"]
    assert missing["state"] == "failed" and missing["attempt"] == 0 and missing["seconds"] < 30, missing
    assert "FuseError: dbfs:/tfos/logs/" in missing["error"] and "cannot be opened on tfos-h2: /dbfs is not " \
        "mounted there" in missing["error"] and "keep the files in a Unity Catalog volume" in missing["error"]


def chaos_run(hosts: FakeHosts, act, scenario: str = "chaos") -> dict:
    """Start ``scenario`` (one that prints READY mid-run), apply ``act(run_id, host of worker:0)``
    then, and return its result."""
    driver = hosts.driver([SCENARIOS, scenario])
    try:
        line, end = "", time.monotonic() + 240
        while time.monotonic() < end and not line.startswith(("READY ", "NOT READY")):
            line = driver.stdout.readline()
            if not line and driver.poll() is not None:
                break
        assert line.startswith("READY "), f"the run never got going: {line!r}\n{driver.stdout.read()[-4000:]}"
        _, run_id, where = line.split(" ", 2)
        victim = json.loads(where)["worker:0"].split(" ")[0]  # the worker's host name
        act(run_id, victim)
        driver.stdin.write("go\n")
        driver.stdin.flush()
        result, _ = wait_for(driver, 420)
    finally:
        kill_process_group(driver, grace=5)  # never left holding the hosts' cores for the next test
    result["victim"] = victim
    return result


def assert_resumed_from_one_checkpoint(result: dict) -> None:
    assert result["error"] is None, result["error"]
    starts = {r["start"] for r in result["results"].values()}
    assert result["attempt"] >= 1 and len(starts) == 1 and starts.pop() >= 5, result["results"]
    assert all(r["final"] == 60 and r["restored"] for r in result["results"].values())


def kill_one(hosts: FakeHosts, host: str, *patterns: str) -> None:
    procs = hosts.host(host).find(*patterns)
    assert len(procs) == 1, procs
    procs[0].send_signal(signal.SIGKILL)


def test_a_killed_node_process_on_one_host_is_relaunched_and_resumes(hosts):
    result = chaos_run(hosts, lambda run_id, host: kill_one(hosts, host, f"cwd=/tmp/tfos-{run_id}-"))
    assert_resumed_from_one_checkpoint(result)
    assert "node_lost_retrying" in [f["code"] for f in result["findings"]]
    assert not left_on_hosts(hosts, result["run_id"])


def test_a_killed_executor_jvm_is_relaunched_and_resumes(hosts):
    result = chaos_run(hosts, lambda run_id, host: kill_one(hosts, host, "CoarseGrainedExecutorBackend"))
    assert_resumed_from_one_checkpoint(result)
    lost = [f["text"] for f in result["findings"] if f["code"] == "node_lost_retrying"]
    assert lost and f"worker:0 on {result['victim']}" in lost[0]
    assert not left_on_hosts(hosts, result["run_id"])


def test_a_host_cut_off_for_60s_is_named_and_the_run_resumes_once_it_is_back(hosts):
    def cut(run_id: str, host: str) -> None:
        hosts.cut(host)
        time.sleep(60)
        hosts.reconnect(host)

    result = chaos_run(hosts, cut)
    unreachable = [f["text"] for f in result["findings"] if f["code"] == "node_unreachable"]
    assert unreachable and f"worker:0 on {result['victim']}" in unreachable[0], result["findings"]
    assert "stopped answering" in unreachable[0]
    assert_resumed_from_one_checkpoint(result)
    assert not left_on_hosts(hosts, result["run_id"])


@pytest.mark.timeout(1200)
def test_example_notebooks_01_02_05_run_across_the_hosts_with_their_work_on_a_volume(hosts):
    result, _ = wait_for(hosts.driver([SCENARIOS, "notebooks"]), 900)
    first, migrated, evaluation = result["01"]["summary"], result["05"]["summary"], result["02"]
    assert first["accuracy"] >= 0.9 and len(first["loss_per_epoch"]) == 3, first
    assert migrated["model_saved"] and migrated["test_rows"] == 297 and migrated["accuracy"] >= 0.85, migrated
    assert [n.split(" ")[0] for n in evaluation["nodes"]] == ["tfos-h1", "tfos-h2"]
    # --logdir and --model-dir on the volume: both nodes wrote their events there
    assert evaluation["log_dir"].startswith("/Volumes/main/tfos/shared/logs/")
    assert evaluation["events"] == ["chief_0", "worker_0"]
    # the second kernel found the run in the driver's registry and evaluated every checkpoint the
    # chief wrote on its host into the shared model dir
    assert "finished: 3 checkpoints evaluated, 0 failed (run finished)" in evaluation["text"], evaluation["text"]


def test_keras3_checkpoints_backup_and_export_reach_the_volume_as_a_volume_takes_them(hosts):
    """Keras 3 writes its weights as .h5 files, which HDF5 writes out of order (a volume refuses
    that): ctx.callbacks()' checkpoints and backup, and the export, still land on the volume."""
    result, _ = wait_for(hosts.driver([SCENARIOS, "keras3_volume"]), 400)
    assert result["error"] is None, result
    files = result["files"]
    assert {"model/ckpt-0001.weights.h5", "model/ckpt-0002.weights.h5"} <= set(files), files
    assert "model/export/saved_model.pb" in files, files
    assert any(f.startswith("logs/") and "chief_0" in f and "events.out.tfevents" in f for f in files), files


def test_a_decommissioned_host_checkpoints_and_the_run_goes_on_on_the_other(hosts):
    """SIGPWR to the worker of worker:0's host mid-epoch (as a cloud's spot notice): both nodes save
    at one step on the volume, and the run finishes on the other host alone (``min_workers=1``),
    resuming at that step. The host's worker stays decommissioned: this test comes last of those
    that launch."""
    result = chaos_run(hosts, lambda run_id, host: hosts.host(host).find("deploy.worker.Worker")[0].send_signal(
        signal.SIGPWR), "decommission")
    assert result["error"] is None, result
    (step, secs), = result["saved"]
    assert 30 < step < 60 and secs < 5.0, result["saved"]
    assert result["result"] == {"final": 120, "start": step, "workers": 1, "attempt": 1}
    assert result["ended"] == [["decommission", 2, step]] and result["launches"] == [2, 1]
    noticed = [f["text"] for f in result["findings"] if f["code"] == "executor_decommissioning"]
    assert noticed and result["victim"] in noticed[0]
    assert not left_on_hosts(hosts, result["run_id"])


def test_nothing_a_run_wrote_to_the_volume_was_refused_by_its_volume_like_mount(hosts):
    """Every run of this module that wrote to the volume (checkpoints and a backup resumed from after
    a node was lost, a host cut off; notebooks 01, 02 and 05's model, checkpoints and event files;
    Keras 3's .h5 weights) did it as a Unity Catalog volume takes it: its mount, which refuses what
    a volume refuses, refused nothing. It does refuse an append, as a volume does."""
    from fakehosts import VOLUME, volume_fuse_reason

    reason = volume_fuse_reason()
    if reason:
        pytest.skip(f"the volume is a plain directory here: {reason}")
    appended = hosts.host("tfos-h1").run(
        f"python3 -c \"open('{VOLUME}/appended', 'w').write('x'); open('{VOLUME}/appended', 'a').write('y')\"")
    assert "[Errno 29] Illegal seek" in appended.stderr, appended.stderr
    refused = hosts.volume_refusals.read_text().splitlines()
    assert refused == ["append /appended"], refused
