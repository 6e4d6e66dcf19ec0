"""The runs API asks the server's authorizer for the ``tfos_notebook`` resource on every verb."""

from __future__ import annotations

import os

import pytest
from jupyter_server.auth.authorizer import Authorizer
from test_runs_api import API, put
from tornado.httpclient import HTTPClientError

from tfos_notebook.state import registry


class DenyTFOS(Authorizer):
    """Allows everything but the tfos_notebook resource."""

    def is_authorized(self, handler, user, action, resource) -> bool:
        return resource != "tfos_notebook"


@pytest.fixture
def jp_server_config():
    return {"ServerApp": {"jpserver_extensions": {"tfos_notebook.server": True},
                          "authorizer_class": DenyTFOS}}


@pytest.mark.parametrize(("method", "path"), [("GET", ("runs",)), ("GET", ("runs", "known")),
                                              ("POST", ("runs", "known", "stop")), ("GET", ("version",))])
async def test_an_authenticated_user_the_authorizer_denies_gets_403(jp_fetch, method, path):
    put("20261122-081000-eeeeee", name="known")
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*API, *path, method=method, **({"body": b""} if method == "POST" else {}))
    assert info.value.code == 403
    assert not os.path.exists(os.path.join(registry.registry_dir(), "20261122-081000-eeeeee.stop"))
