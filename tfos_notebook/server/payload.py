"""The JSON a run is sent as: its registry record, with a TensorBoard URL this server's browser
can open."""

from __future__ import annotations

from ..state.registry import RunRecord
from ..tensorboard.urls import LOCAL_URL_PREFIX, has_jupyter_proxy, jupyter_proxy_url


def tensorboard_url(record: RunRecord, base_url: str) -> str | None:
    """The record's TensorBoard URL (a jupyter-server-proxy or Databricks proxy URL, as the kernel
    that owns the run built it). A run launched outside Jupyter records ``http://127.0.0.1:<port>/``,
    which a remote browser cannot open: this server's ``<base_url>proxy/<port>/`` is given instead
    when jupyter-server-proxy is installed. None while the run has no TensorBoard."""
    url, port = record.tensorboard_url, record.tensorboard_port
    if port is None:
        return url
    if (url is None or url.startswith(LOCAL_URL_PREFIX)) and has_jupyter_proxy():
        return jupyter_proxy_url(base_url, port)
    return url


def run_payload(record: RunRecord, base_url: str) -> dict:
    """``record`` as JSON-ready data, with ``tensorboard_url`` for this server's browser (None for
    a ``lost`` run: its TensorBoard went with its kernel)."""
    data = record.to_json()
    data["ended"] = record.ended
    data["tensorboard_url"] = None if record.state == "lost" else tensorboard_url(record, base_url)
    return data
