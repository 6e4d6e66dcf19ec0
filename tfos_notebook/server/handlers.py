"""REST handlers over the runs registry, under ``<base_url>tfos-notebook/api/``.

| verb and path          | answer                                                      |
|------------------------|-------------------------------------------------------------|
| ``GET runs``           | ``{"runs": [run, ...]}``, newest first                      |
| ``DELETE runs``        | removes every ended run; ``{"cleared": n}``                 |
| ``GET runs/<run>``     | one run (by run id or name), with its TensorBoard URL       |
| ``POST runs/<run>/stop`` | asks the owning kernel to stop the run; 202 with the run  |
| ``GET version``        | ``{"version": ...}``                                        |

Every verb needs an authenticated user (403 otherwise) allowed the ``tfos_notebook`` resource by
the server's authorizer. Errors are JSON ``{"message": ...}``: 404 for a run the registry does not
know (the message names the known ones), 409 for a run that has already ended.
"""

from __future__ import annotations

import json

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from ..errors import ConfigError
from ..state import registry
from .payload import run_payload

API_PREFIX = "tfos-notebook/api"
AUTH_RESOURCE = "tfos_notebook"


class _RegistryHandler(APIHandler):
    """Common ground: the authorization resource and the lookup of a run by id or name."""

    auth_resource = AUTH_RESOURCE

    def _find(self, which: str) -> registry.RunRecord:
        try:
            return registry.get_run(which)
        except ConfigError as e:
            raise web.HTTPError(404, str(e)) from None

    def _send(self, data: dict, status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(data))


class RunsHandler(_RegistryHandler):
    """``GET runs``: every run in the registry, newest first; ``DELETE runs``: clear the ended ones."""

    @web.authenticated
    @authorized
    def get(self) -> None:
        base_url = self.base_url
        self._send({"runs": [run_payload(r, base_url) for r in registry.list_runs()]})

    @web.authenticated
    @authorized
    def delete(self) -> None:
        """Clear the ended runs (finished, failed, stopped, lost) from the registry."""
        self._send({"cleared": registry.clear_ended()})


class RunHandler(_RegistryHandler):
    """``GET runs/<run>``: one run, found by run id or name."""

    @web.authenticated
    @authorized
    def get(self, which: str) -> None:
        self._send(run_payload(self._find(which), self.base_url))


class StopHandler(_RegistryHandler):
    """``POST runs/<run>/stop``: ask the kernel that owns the run to stop it."""

    @web.authenticated
    @authorized
    def post(self, which: str) -> None:
        record = self._find(which)
        if record.ended:
            raise web.HTTPError(409, f"run {record.name} ({record.run_id}) has already ended "
                                     f"({record.state}): there is nothing to stop")
        try:
            record = registry.request_stop(record.run_id)
        except ConfigError as e:  # ended (or lost its kernel) since it was read
            raise web.HTTPError(409, str(e)) from None
        self._send(run_payload(record, self.base_url), status=202)


class VersionHandler(_RegistryHandler):
    """``GET version``: the installed tfos_notebook's version (the frontend checks it is there)."""

    @web.authenticated
    @authorized
    def get(self) -> None:
        from .. import __version__

        self._send({"version": __version__})


_RUN = r"(?P<which>[^/]+)"
ROUTES = [
    ("runs", RunsHandler),
    (f"runs/{_RUN}", RunHandler),
    (f"runs/{_RUN}/stop", StopHandler),
    ("version", VersionHandler),
]
