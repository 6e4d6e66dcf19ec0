"""Where a browser opens an MLflow run: the tracking server's UI, or the Databricks workspace."""

from __future__ import annotations

import logging
import os
import urllib.parse
from collections.abc import Callable

from ..tensorboard.urls import WORKSPACE_URL_KEY

log = logging.getLogger(__name__)

Conf = Callable[[str], "str | None"]


def run_url(tracking_uri: str, experiment_id: str, run_id: str, conf: Conf | None = None) -> str | None:
    """The page of run ``run_id`` of experiment ``experiment_id`` in the UI that serves
    ``tracking_uri``: ``<server>/#/experiments/<id>/runs/<run>`` for an HTTP tracking server,
    ``https://<workspace>/ml/experiments/<id>/runs/<run>`` on Databricks (as MLflow itself links
    runs); None for a local store (``sqlite:``, ``file:``), which no UI serves by itself, or a
    workspace whose address is unknown. ``conf`` reads the driver's Spark conf."""
    scheme = urllib.parse.urlparse(tracking_uri).scheme
    if scheme in ("http", "https"):
        return f"{tracking_uri.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
    if scheme == "databricks" or tracking_uri == "databricks":
        host = databricks_host(conf)
        return f"{host}/ml/experiments/{experiment_id}/runs/{run_id}" if host else None
    return None


def databricks_host(conf: Conf | None = None) -> str | None:
    """The workspace's URL (``https://...``): from the notebook's context as MLflow reads it, else
    the cluster's ``spark.databricks.workspaceUrl``, else ``DATABRICKS_HOST``; None when unknown."""
    host = None
    try:
        from mlflow.utils.databricks_utils import get_workspace_url

        host = get_workspace_url()
    except Exception as e:  # no notebook context: the other sources may know
        log.debug("no workspace URL from the notebook's context: %s", e)
    host = host or (conf(WORKSPACE_URL_KEY) if conf is not None else None) or os.environ.get("DATABRICKS_HOST")
    if not host:
        return None
    host = host.rstrip("/")
    return host if "://" in host else f"https://{host}"
