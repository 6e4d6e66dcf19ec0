"""A real Jupyter server with jupyter-server-proxy in front of a TensorBoard we started."""

import glob
import http.client
import json
import os
import subprocess
import sys
import time

import pytest
from tbhelpers import scalar_record, version_record

from tfos_notebook.runtime.host.ports import free_port
from tfos_notebook.tensorboard import process

WORKTREE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKEN = "tfos-test-token-5f2c"
BASE_URL = "/base/"


@pytest.fixture
def jupyter_server(tmp_path):
    runtime = tmp_path / "runtime"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}
    port = free_port()
    with open(tmp_path / "server.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root", f"--ServerApp.port={port}",
             "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}", f"--ServerApp.base_url={BASE_URL}",
             f"--ServerApp.root_dir={tmp_path}"],
            env=env, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 60
    while not glob.glob(str(runtime / "jpserver-*.json")):
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
        time.sleep(0.2)
    yield {"pid": proc.pid, "port": port, "runtime_dir": str(runtime)}
    proc.terminate()
    proc.wait(timeout=30)


def _get(port: int, path: str, token: str | None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request("GET", path, headers={"Authorization": f"token {token}"} if token else {})
    r = conn.getresponse()
    return r.status, r.read()


def _url_seen_by_a_kernel(server: dict, tb_port: int) -> str:
    """tensorboard_url() run in a process with the environment jupyter_client gives a kernel."""
    env = {**os.environ, "JPY_PARENT_PID": str(server["pid"]), "JUPYTER_RUNTIME_DIR": server["runtime_dir"],
           "PYTHONPATH": WORKTREE}
    code = f"from tfos_notebook.tensorboard import tensorboard_url; print(tensorboard_url({tb_port}))"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_jupyter_server_proxy_serves_tensorboard_with_the_token_and_refuses_it_without(
        tmp_path, jupyter_server, stop_tensorboards):
    logdir = tmp_path / "mirror" / "chief_0"
    logdir.mkdir(parents=True)
    (logdir / "events.out.tfevents.1.test").write_bytes(version_record(time.time()) + scalar_record("loss", 2.0, 1))
    tb = process.start(str(tmp_path / "mirror")).info

    url = _url_seen_by_a_kernel(jupyter_server, tb.port)
    assert url == f"{BASE_URL}proxy/{tb.port}/"

    deadline = time.monotonic() + 30
    while True:
        status, body = _get(jupyter_server["port"], f"{url}data/runs", TOKEN)
        if status == 200 and json.loads(body) == ["chief_0"] or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert (status, json.loads(body)) == (200, ["chief_0"])

    status, body = _get(jupyter_server["port"], f"{url}data/runs", None)
    assert status in (302, 401, 403) and b"chief_0" not in body
    status, body = _get(jupyter_server["port"], f"{url}data/runs", "wrong-token")
    assert status in (302, 401, 403) and b"chief_0" not in body
