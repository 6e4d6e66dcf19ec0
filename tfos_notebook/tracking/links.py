"""Where a browser opens an MLflow run: the tracking server's UI, or the Databricks workspace."""

from __future__ import annotations

import os
import urllib.parse


def run_url(tracking_uri: str, experiment_id: str, run_id: str, workspace_host: str | None = None) -> str | None:
    """The page of run ``run_id`` of experiment ``experiment_id`` in the UI that serves
    ``tracking_uri``: ``<server>/#/experiments/<id>/runs/<run>`` for an HTTP tracking server,
    ``https://<workspace>/ml/experiments/<id>/runs/<run>`` on Databricks (as MLflow itself links
    runs), the workspace being ``workspace_host`` (the browser's host of the driver's Databricks
    context) or else ``DATABRICKS_HOST``; None for a local store (``sqlite:``, ``file:``), which no UI
    serves by itself, or a workspace whose address is unknown."""
    scheme = urllib.parse.urlparse(tracking_uri).scheme
    if scheme in ("http", "https"):
        return f"{tracking_uri.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
    if scheme == "databricks" or tracking_uri == "databricks":
        host = (workspace_host or os.environ.get("DATABRICKS_HOST") or "").rstrip("/")
        if not host:
            return None
        host = host if "://" in host else f"https://{host}"
        return f"{host}/ml/experiments/{experiment_id}/runs/{run_id}"
    return None
