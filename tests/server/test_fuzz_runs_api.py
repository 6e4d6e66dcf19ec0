"""Fuzzing the runs API of a real Jupyter server: random methods, paths, queries, bodies and
tokens. No answer is a 500 or carries a traceback, nothing but a request with the server's token
gets a 2xx or touches the registry, and the server keeps serving."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
from urllib.parse import quote

import pytest
from fuzzing import values
from hypothesis import given, settings
from hypothesis import strategies as st
from test_runs_api import API, put

from tfos_notebook.state import registry

pytestmark = pytest.mark.fuzz

RUN_ID, RUN_NAME = "20261122-090000-fuzzed", "fuzzed"
segments = st.sampled_from(["runs", "version", "stop", RUN_ID, RUN_NAME, "..", ".", "", "%2e%2e", "%00",
                            "%ff", "runs%2fx"]) | st.text(max_size=12).map(lambda s: quote(s, safe=""))


@st.composite
def requests(draw):
    path = "/".join(draw(st.lists(segments, max_size=4)))
    if draw(st.booleans()):
        path += "?" + draw(st.text(max_size=20).map(lambda s: quote(s, safe="=&")))
    body = draw(st.none() | st.binary(max_size=200) | values.map(lambda v: json.dumps(v, default=repr).encode()))
    return (draw(st.sampled_from(["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"])), path, body,
            draw(st.sampled_from(["token", "none", "wrong", "empty", "random"])), draw(st.text(max_size=30)))


async def test_random_requests_never_fail_inside_and_only_the_token_opens_the_registry(
        jp_serverapp, jp_http_port, jp_base_url, jp_auth_header, jp_fetch):
    put(RUN_ID, name=RUN_NAME)
    stop_file = os.path.join(registry.registry_dir(), f"{RUN_ID}.stop")
    prefix = f"{jp_base_url}{'/'.join(API)}/"
    statuses: set[int] = set()

    @settings(max_examples=250)
    @given(request=requests())
    def fuzz(request):
        method, path, body, auth, junk = request
        headers = {"token": jp_auth_header, "none": {}, "wrong": {"Authorization": "token wrong-token"},
                   "empty": {"Authorization": ""},
                   "random": {"Authorization": junk.encode("utf-8", "replace").decode("latin-1")}}[auth]
        had_stop = os.path.exists(stop_file)
        conn = http.client.HTTPConnection("127.0.0.1", jp_http_port, timeout=20)
        try:
            conn.request(method, prefix + path, body=body, headers=headers)
            response = conn.getresponse()
            status = response.status
            try:
                text = response.read()
            except ConnectionResetError:  # it answered before reading the body it refuses, then closed
                text = b""
        finally:
            conn.close()
        statuses.add(status)
        assert status < 500, (status, text[:500])
        assert b"Traceback" not in text and b'File "' not in text
        if auth != "token":
            assert not 200 <= status < 300, (method, path, status)
            assert RUN_ID.encode() not in text
            assert os.path.exists(stop_file) == had_stop

    await asyncio.to_thread(fuzz)
    assert {200, 403, 404} <= statuses  # served with the token, refused without, paths no route knows
    run = json.loads((await jp_fetch(*API, "runs", RUN_ID)).body)
    assert run["run_id"] == RUN_ID and run["state"] in ("running", "stopping")
    assert json.loads((await jp_fetch(*API, "version")).body)["version"]
