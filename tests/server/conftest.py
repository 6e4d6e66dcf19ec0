"""A real Jupyter server (pytest-jupyter) with the tfos_notebook server extension enabled, and a
runs registry of its own per test."""

from __future__ import annotations

import pytest
from pytest_jupyter.jupyter_server import *  # noqa: F403  (fixtures and hooks: jp_fetch, jp_serverapp...)


@pytest.fixture
def jp_server_config():
    """The server loads the extension as the installed config file would."""
    return {"ServerApp": {"jpserver_extensions": {"tfos_notebook.server": True}}}


@pytest.fixture(autouse=True)
def _own_registry(tmp_path, monkeypatch):
    monkeypatch.setenv("TFOS_NOTEBOOK_STATE_DIR", str(tmp_path / "state"))
