"""Registers the extension's handlers with a running Jupyter server."""

from __future__ import annotations

from jupyter_server.utils import url_path_join

from .handlers import API_PREFIX, ROUTES


def load_jupyter_server_extension(serverapp) -> None:
    """Add the REST routes under ``<base_url>tfos-notebook/api/`` to ``serverapp``'s web app."""
    web_app = serverapp.web_app
    base_url = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [(url_path_join(base_url, API_PREFIX, route), handler)
                                 for route, handler in ROUTES])
    serverapp.log.info("tfos_notebook: runs API at %s", url_path_join(base_url, API_PREFIX))
