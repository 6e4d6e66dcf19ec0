"""Where a browser opens an MLflow run: the tracking server's UI, or the Databricks workspace."""

from __future__ import annotations

import logging
import os
import urllib.parse

log = logging.getLogger(__name__)


def run_url(tracking_uri: str, experiment_id: str, run_id: str) -> str | None:
    """The page of run ``run_id`` of experiment ``experiment_id`` in the UI that serves
    ``tracking_uri``: ``<server>/#/experiments/<id>/runs/<run>`` for an HTTP tracking server,
    ``https://<workspace>/ml/experiments/<id>/runs/<run>`` on Databricks (as MLflow itself links
    runs); None for a local store (``sqlite:``, ``file:``), which no UI serves by itself."""
    scheme = urllib.parse.urlparse(tracking_uri).scheme
    if scheme in ("http", "https"):
        return f"{tracking_uri.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
    if scheme == "databricks" or tracking_uri.startswith("databricks"):
        host = databricks_host(tracking_uri)
        return f"{host}/ml/experiments/{experiment_id}/runs/{run_id}" if host else None
    return None


def databricks_host(tracking_uri: str) -> str | None:
    """The workspace's URL (``https://...``) as MLflow finds it: the notebook's context, the
    ``DATABRICKS_HOST`` setting or a config profile; None when it cannot tell."""
    try:
        from mlflow.utils.databricks_utils import get_databricks_host_creds, get_workspace_url

        host = get_workspace_url() or get_databricks_host_creds(tracking_uri).host
    except Exception as e:  # no context, no profile: the run is logged all the same, without a link
        log.debug("no Databricks workspace URL for %s: %s", tracking_uri, e)
        host = os.environ.get("DATABRICKS_HOST")
    if not host:
        return None
    host = host.rstrip("/")
    return host if "://" in host else f"https://{host}"
