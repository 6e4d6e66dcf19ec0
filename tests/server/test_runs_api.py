"""The server extension's REST API over the on-disk runs registry: listing, one run with its
TensorBoard URL, stop requests, JSON errors, and authentication on every verb."""

from __future__ import annotations

import asyncio
import json
import os
import time

import psutil
import pytest
from tornado.httpclient import HTTPClientError

from tfos_notebook.notebook.tracker import track
from tfos_notebook.state import registry
from tfos_notebook.state.files import write_json_atomic

API = ("tfos-notebook", "api")
NO_TOKEN = {"Authorization": ""}


def put(run_id: str, state: str = "running", **kw) -> registry.RunRecord:
    """A registry record owned by this (live) process, written as the registry writes it."""
    me = psutil.Process()
    record = registry.RunRecord(run_id=run_id, name=kw.pop("name", run_id), state=state, owner_pid=me.pid,
                                owner_create_time=me.create_time(), **kw)
    write_json_atomic(os.path.join(registry.registry_dir(), f"{run_id}.json"), record.to_json())
    return record


async def fetch_error(jp_fetch, *path, **kw) -> tuple[int, dict]:
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*API, *path, **kw)
    body = info.value.response.body
    return info.value.code, json.loads(body) if body else {}


async def test_runs_lists_every_run_newest_first_with_state_step_and_loss(jp_fetch):
    put("20261122-080000-aaaaaa", name="old", state="finished", started_at=time.time() - 60, ended_at=time.time())
    put("20261122-080100-bbbbbb", name="new", step=40, loss=0.25, roles=("chief:0", "worker:0"), num_nodes=2)
    response = await jp_fetch(*API, "runs")
    runs = json.loads(response.body)["runs"]
    assert [r["name"] for r in runs] == ["new", "old"]
    assert runs[0]["state"] == "running" and runs[0]["step"] == 40 and runs[0]["loss"] == 0.25
    assert runs[0]["roles"] == ["chief:0", "worker:0"] and runs[0]["ended"] is False
    assert runs[1]["ended"] is True


async def test_a_run_is_found_by_id_or_name_with_its_proxy_tensorboard_url(jp_fetch, jp_base_url):
    put("20261122-080200-cccccc", name="digits", tensorboard_port=40123,
        tensorboard_url=f"{jp_base_url}proxy/40123/")
    by_id = json.loads((await jp_fetch(*API, "runs", "20261122-080200-cccccc")).body)
    by_name = json.loads((await jp_fetch(*API, "runs", "digits")).body)
    assert by_id == by_name
    assert by_id["tensorboard_url"] == f"{jp_base_url}proxy/40123/"


async def test_a_run_launched_outside_jupyter_gets_this_servers_proxy_url_for_its_tensorboard(
        jp_fetch, jp_base_url):
    put("20261122-080300-dddddd", tensorboard_port=40124, tensorboard_url="http://127.0.0.1:40124/")
    run = json.loads((await jp_fetch(*API, "runs", "20261122-080300-dddddd")).body)
    assert run["tensorboard_url"] == f"{jp_base_url}proxy/40124/"


async def test_a_databricks_driver_proxy_url_is_passed_through(jp_fetch):
    url = "https://example.cloud.databricks.com/driver-proxy/o/123/0101-abc/6006/"
    put("20261122-080350-eeeeee", tensorboard_port=6006, tensorboard_url=url)
    assert json.loads((await jp_fetch(*API, "runs", "20261122-080350-eeeeee")).body)["tensorboard_url"] == url


async def test_a_run_logged_to_mlflow_carries_its_mlflow_runs_link(jp_fetch):
    url = "https://adb-1.2.azuredatabricks.net/ml/experiments/7/runs/4f2a"
    put("20261122-080370-eeeeee", mlflow_run_id="4f2a", mlflow_url=url, mlflow_tracking_uri="databricks")
    run = json.loads((await jp_fetch(*API, "runs", "20261122-080370-eeeeee")).body)
    assert (run["mlflow_run_id"], run["mlflow_url"], run["mlflow_error"]) == ("4f2a", url, None)


async def test_a_run_without_tensorboard_has_no_url(jp_fetch):
    put("20261122-080400-eeeeee")
    assert json.loads((await jp_fetch(*API, "runs", "20261122-080400-eeeeee")).body)["tensorboard_url"] is None


async def test_an_unknown_run_is_a_404_whose_message_names_the_known_runs(jp_fetch):
    put("20261122-080500-ffffff", name="digits")
    code, body = await fetch_error(jp_fetch, "runs", "nope")
    assert code == 404
    assert "no run named 'nope'" in body["message"] and "digits (running)" in body["message"]
    code, body = await fetch_error(jp_fetch, "runs", "nope", "stop", method="POST", body=b"")
    assert code == 404 and "no run named 'nope'" in body["message"]


async def test_stop_writes_a_stop_request_for_the_owning_kernel(jp_fetch):
    put("20261122-080600-aaaaaa", name="long")
    response = await jp_fetch(*API, "runs", "long", "stop", method="POST", body=b"")
    assert response.code == 202
    assert json.loads(response.body)["run_id"] == "20261122-080600-aaaaaa"
    assert os.path.exists(os.path.join(registry.registry_dir(), "20261122-080600-aaaaaa.stop"))


@pytest.mark.parametrize("state", ["finished", "failed", "stopped"])
async def test_stopping_a_run_that_has_ended_is_a_409_saying_so(jp_fetch, state):
    put("20261122-080700-bbbbbb", name="done", state=state, ended_at=time.time())
    code, body = await fetch_error(jp_fetch, "runs", "done", "stop", method="POST", body=b"")
    assert code == 409
    assert body["message"] == f"run done (20261122-080700-bbbbbb) has already ended ({state}): there is nothing to stop"
    assert not os.path.exists(os.path.join(registry.registry_dir(), "20261122-080700-bbbbbb.stop"))


async def test_a_run_whose_kernel_died_reads_lost_and_cannot_be_stopped(jp_fetch):
    proc = psutil.Popen(["sleep", "0.1"])
    created = proc.create_time()
    proc.wait()
    record = registry.RunRecord(run_id="20261122-080800-cccccc", name="orphan", state="running",
                                owner_pid=proc.pid, owner_create_time=created)
    write_json_atomic(os.path.join(registry.registry_dir(), f"{record.run_id}.json"), record.to_json())
    assert json.loads((await jp_fetch(*API, "runs", "orphan")).body)["state"] == "lost"
    code, body = await fetch_error(jp_fetch, "runs", "orphan", "stop", method="POST", body=b"")
    assert code == 409 and "(lost)" in body["message"]


async def test_delete_runs_clears_the_ended_runs_and_keeps_those_going(jp_fetch):
    for i, state in enumerate(["finished", "failed", "stopped", "running"]):
        put(f"20261122-081000-00000{i}", name=state, state=state)
    proc = psutil.Popen(["sleep", "0.1"])
    created = proc.create_time()
    proc.wait()
    lost = registry.RunRecord(run_id="20261122-081000-000009", name="lost", state="running", owner_pid=proc.pid,
                              owner_create_time=created, tensorboard_port=40125, tensorboard_url="/proxy/40125/")
    write_json_atomic(os.path.join(registry.registry_dir(), f"{lost.run_id}.json"), lost.to_json())
    listed = {r["name"]: r for r in json.loads((await jp_fetch(*API, "runs")).body)["runs"]}
    assert listed["lost"]["state"] == "lost" and listed["lost"]["tensorboard_url"] is None  # gone with its kernel
    response = await jp_fetch(*API, "runs", method="DELETE")
    assert json.loads(response.body) == {"cleared": 4}
    assert [r.name for r in registry.list_runs()] == ["running"]


def test_a_record_keeps_a_bounded_loss_curve_spanning_the_run():
    record = put("20261122-081100-aaaaaa")
    for step in range(500):
        record = record.with_point(step, 1.0 / (step + 1))
    assert len(record.curve) <= registry.MAX_CURVE_POINTS
    assert record.curve[0] == (0, 1.0) and record.curve[-1] == (499, 1.0 / 500)
    assert registry.RunRecord.from_json(json.loads(json.dumps(record.to_json()))) == record


async def test_version_answers_with_the_package_version(jp_fetch):
    from tfos_notebook import __version__

    assert json.loads((await jp_fetch(*API, "version")).body) == {"version": __version__}


@pytest.mark.parametrize(("method", "path"), [("GET", ("runs",)), ("DELETE", ("runs",)), ("GET", ("runs", "known")),
                                              ("POST", ("runs", "known", "stop")), ("GET", ("version",))])
async def test_every_verb_refuses_a_request_without_the_token(jp_fetch, method, path):
    put("20261122-080900-dddddd", name="known")
    code, _ = await fetch_error(jp_fetch, *path, method=method, headers=NO_TOKEN,
                                **({"body": b""} if method == "POST" else {}))
    assert code in (401, 403)
    assert not os.path.exists(os.path.join(registry.registry_dir(), "20261122-080900-dddddd.stop"))


def stay_busy(args, ctx) -> None:
    import time as _time

    for i in range(600):
        ctx.report(i, loss=1.0 / (i + 1))
        _time.sleep(0.1)


async def wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.2)
    return False


async def test_post_stop_stops_a_real_run_in_its_owning_process(jp_fetch, local_spark):
    from tfos_notebook import Run

    run = Run(local_spark.sparkContext, stay_busy, None, 2, name="busy", preflight_wait=5)
    tracker = track(run)
    run.start()
    try:
        assert await wait_for(lambda: registry.get_run("busy").state == "running" and
                              registry.get_run("busy").step is not None, 90)
        listed = json.loads((await jp_fetch(*API, "runs")).body)["runs"]
        assert [(r["name"], r["state"]) for r in listed] == [("busy", "running")]
        assert await wait_for(lambda: len(registry.get_run("busy").curve) >= 3, 30)  # the sidebar's curve
        asked = time.monotonic()
        response = await jp_fetch(*API, "runs", "busy", "stop", method="POST", body=b"")
        assert response.code == 202
        assert await wait_for(lambda: registry.get_run("busy").state == "stopped", 60)
        assert run.state == "stopped" and time.monotonic() - asked < 30
        code, body = await fetch_error(jp_fetch, "runs", "busy", "stop", method="POST", body=b"")
        assert code == 409 and "has already ended (stopped)" in body["message"]
        ending = time.monotonic()  # the request's watcher is free again (not stuck in its run.stop)
        tracker.stop()
        assert time.monotonic() - ending < 20 and "stop request failed" not in registry.get_run("busy").error
    finally:
        if not run.done:
            run.stop()
        tracker.stop()
