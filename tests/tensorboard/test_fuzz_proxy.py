"""Fuzzing a run's TensorBoard behind jupyter-server-proxy on a real Jupyter server: random paths,
queries and methods. Without the server's token the proxy refuses every one before TensorBoard
sees it; with it, nothing answers with a traceback, and TensorBoard keeps serving the run."""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tbhelpers import scalar_record, version_record
from test_jupyter_proxy import BASE_URL, TOKEN, _get, jupyter_server  # noqa: F401  (a fixture)

from tfos_notebook.tensorboard import process

pytestmark = pytest.mark.fuzz

segments = st.sampled_from(["data", "runs", "plugin", "scalars", "tags", "logdir", "environment", "..", "%2e%2e",
                            "%00", "%ff", "index.html", "font-roboto", "experiment"]) \
    | st.text(max_size=12).map(lambda s: quote(s, safe=""))
queries = st.dictionaries(st.sampled_from(["run", "tag", "experiment", "format", "x"]) | st.text(max_size=6),
                          st.text(max_size=20), max_size=3)


def test_random_requests_through_the_proxy_are_refused_without_the_token_and_never_break_tensorboard(
        tmp_path, jupyter_server, stop_tensorboards):  # noqa: F811
    logdir = tmp_path / "mirror" / "chief_0"
    logdir.mkdir(parents=True)
    (logdir / "events.out.tfevents.1.test").write_bytes(version_record(time.time()) + scalar_record("loss", 2.0, 1))
    tb = process.start(str(tmp_path / "mirror")).info
    prefix = f"{BASE_URL}proxy/{tb.port}/"
    port = jupyter_server["port"]
    deadline = time.monotonic() + 30
    while _get(port, f"{prefix}data/runs", TOKEN) != (200, b'["chief_0"]') and time.monotonic() < deadline:
        time.sleep(0.3)
    statuses: set[int] = set()

    @settings(max_examples=120)
    @given(method=st.sampled_from(["GET", "POST", "HEAD"]), path=st.lists(segments, max_size=4).map("/".join),
           query=queries, auth=st.sampled_from(["token", "none", "wrong"]))
    def fuzz(method, path, query, auth):
        url = prefix + path + ("?" + "&".join(f"{quote(k)}={quote(v)}" for k, v in query.items()) if query else "")
        headers = {"token": {"Authorization": f"token {TOKEN}"}, "none": {},
                   "wrong": {"Authorization": "token wrong"}}[auth]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        try:
            conn.request(method, url, headers=headers)
            response = conn.getresponse()
            status, body = response.status, response.read()
        finally:
            conn.close()
        statuses.add(status)
        assert b"Traceback" not in body and b'File "' not in body
        if auth != "token":
            assert not 200 <= status < 300, (method, url, status)  # a login redirect, 400, 403...
            assert b"chief_0" not in body and b"tensorboard" not in body.lower()
        else:
            assert status < 500, (method, url, status, body[:300])

    fuzz()
    assert {200, 403} <= statuses
    assert _get(port, f"{prefix}data/runs", TOKEN) == (200, b'["chief_0"]')
    status, body = _get(port, f"{prefix}data/plugin/scalars/scalars?run=chief_0&tag=loss", TOKEN)
    assert status == 200 and [step for _, step, _ in json.loads(body)] == [1]
