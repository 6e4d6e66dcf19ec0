"""The one place that turns a TensorBoard port on the driver into the URL a browser opens.

In order of preference:
1. Databricks: the driver proxy, ``https://<workspace>/driver-proxy/o/<org>/<cluster>/<port>/``
   (ids from the Spark conf), which forwards ports 6006-6106 only.
2. Jupyter with jupyter-server-proxy: ``<base_url>proxy/<port>/`` of the Jupyter server running
   this kernel (found from its runtime file by the kernel's parent pid), a path on the page's origin.
3. Otherwise ``http://127.0.0.1:<port>/``, which works when the browser runs on the driver.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Mapping

import psutil

from ..errors import TFOSError

log = logging.getLogger(__name__)

DATABRICKS_PORTS = range(6006, 6107)
ORG_ID_KEY = "spark.databricks.clusterUsageTags.clusterOwnerOrgId"
CLUSTER_ID_KEY = "spark.databricks.clusterUsageTags.clusterId"
WORKSPACE_URL_KEY = "spark.databricks.workspaceUrl"
LOCAL_URL_PREFIX = "http://127.0.0.1:"


class ProxyPortError(TFOSError, ValueError):
    """The port cannot be reached through the proxy in use."""


def _get(conf, key: str) -> str | None:
    """Read ``key`` from a SparkConf, a mapping, or a lookup function (``SparkBackend.conf``)."""
    if conf is None:
        return None
    if isinstance(conf, Mapping):
        value = conf.get(key)
    elif callable(conf):
        value = conf(key)
    else:
        value = conf.get(key, None)
    return value or None


def databricks_ids(conf) -> tuple[str, str] | None:
    """``(org_id, cluster_id)`` when ``conf`` (a SparkConf, mapping or lookup function ``key ->
    value``) is a Databricks cluster's."""
    org, cluster = _get(conf, ORG_ID_KEY), _get(conf, CLUSTER_ID_KEY)
    return (org, cluster) if org and cluster else None


def port_candidates(conf=None) -> range | None:
    """The ports a TensorBoard may use so the browser can reach it (None: any)."""
    return DATABRICKS_PORTS if databricks_ids(conf) else None


def jupyter_server(env: Mapping[str, str] | None = None, pid: int | None = None) -> dict | None:
    """The runtime info (``base_url``, ``port``, ``token``, ``pid``...) of the Jupyter server that
    started this kernel: the server whose pid is ``$JPY_PARENT_PID`` (set by jupyter_client for
    every kernel it launches) or an ancestor of ``pid``. None outside Jupyter."""
    env = os.environ if env is None else env
    try:
        from jupyter_server.serverapp import list_running_servers
    except ImportError:
        return None
    wanted = set()
    if env.get("JPY_PARENT_PID", "").isdigit():
        wanted.add(int(env["JPY_PARENT_PID"]))
    try:
        wanted.update(p.pid for p in psutil.Process(pid or os.getpid()).parents())
    except psutil.Error as e:  # this process's parents are unknown: JPY_PARENT_PID alone
        log.debug("no parent processes to match a Jupyter server to: %s", e)
    runtime_dir = env.get("JUPYTER_RUNTIME_DIR")
    return next((info for info in list_running_servers(runtime_dir) if info.get("pid") in wanted), None)


def has_jupyter_proxy() -> bool:
    """Whether jupyter-server-proxy is installed (a Jupyter server then proxies local ports)."""
    return importlib.util.find_spec("jupyter_server_proxy") is not None


def jupyter_proxy_url(base_url: str, port: int) -> str:
    """``<base_url>proxy/<port>/``: driver port ``port`` through the jupyter-server-proxy of the
    Jupyter server at ``base_url``."""
    return f"{base_url if base_url.endswith('/') else base_url + '/'}proxy/{port}/"


def local_url(port: int) -> str:
    """``http://127.0.0.1:<port>/``: reachable by a browser running on the driver only."""
    return f"{LOCAL_URL_PREFIX}{port}/"


def tensorboard_url(port: int, conf=None, env: Mapping[str, str] | None = None) -> str:
    """The URL at which a browser reaches the TensorBoard listening on driver port ``port``.

    Args:
        port: the TensorBoard's port on 127.0.0.1.
        conf: the driver's Spark conf (a SparkConf, a mapping, or a lookup function such as
            ``SparkBackend.conf``); tells a Databricks cluster apart.
        env: the environment to read (default ``os.environ``).

    Raises:
        ProxyPortError: on Databricks, for a port outside 6006-6106.
    """
    ids = databricks_ids(conf)
    if ids:
        if port not in DATABRICKS_PORTS:
            raise ProxyPortError(
                f"port {port} is not reachable through the Databricks driver proxy, which forwards ports "
                f"{DATABRICKS_PORTS.start}-{DATABRICKS_PORTS.stop - 1} only: start TensorBoard on one of those")
        path = f"/driver-proxy/o/{ids[0]}/{ids[1]}/{port}/"
        workspace = _get(conf, WORKSPACE_URL_KEY)
        return f"https://{workspace.removeprefix('https://').rstrip('/')}{path}" if workspace else path
    if has_jupyter_proxy():
        server = jupyter_server(env)
        if server is not None:
            return jupyter_proxy_url(server.get("base_url") or "/", port)
    return local_url(port)
