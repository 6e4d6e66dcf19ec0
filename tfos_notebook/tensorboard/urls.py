"""The one place that turns a TensorBoard port on the driver into the URL a browser opens, and
says where the TensorBoard must listen for that URL to reach it.

In order of preference:
1. Databricks (a cluster's driver, see ``runtime.driver.spark.databricks``): the cluster's driver proxy,
   ``https://<browser host>/driver-proxy/o/<workspace id>/<cluster id>/<port>/``. The proxy
   authenticates the browser as a user allowed to attach to the cluster, and reaches the port only
   when TensorBoard listens beyond the loopback (``bind_host``). Ports are chosen in 6006-6106
   (TensorBoard's own 6006 upward), never the notebook's ipywidgets comm channel (6062 by default).
2. Jupyter with jupyter-server-proxy: ``<base_url>proxy/<port>/`` of the Jupyter server running
   this kernel (found from its runtime file by the kernel's parent pid), a path on the page's origin.
3. Otherwise ``http://127.0.0.1:<port>/``, which works when the browser runs on the driver.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

import psutil

from ..errors import TFOSError

if TYPE_CHECKING:  # the Jupyter server extension imports this module and must not load the runtime
    from ..runtime.driver.spark.databricks import DatabricksContext

log = logging.getLogger(__name__)

DATABRICKS_PORTS = range(6006, 6107)
LOOPBACK = "127.0.0.1"
LOCAL_URL_PREFIX = f"http://{LOOPBACK}:"
ALL_INTERFACES = "0.0.0.0"


class ProxyPortError(TFOSError, ValueError):
    """The port cannot be reached through the proxy in use."""


def _proxied(databricks: DatabricksContext | None) -> DatabricksContext | None:
    return databricks if databricks is not None and databricks.has_driver_proxy else None


def port_candidates(databricks: DatabricksContext | None = None) -> list[int] | None:
    """The ports a TensorBoard may use so the browser can reach it (None: any free port)."""
    where = _proxied(databricks)
    return None if where is None else [p for p in DATABRICKS_PORTS if p != where.comm_port]


def bind_host(databricks: DatabricksContext | None = None) -> str:
    """Where a TensorBoard listens: every interface on a Databricks cluster's driver, whose proxy
    connects from beyond the loopback and lets in only users allowed to attach to the cluster;
    127.0.0.1 everywhere else (jupyter-server-proxy and a local browser connect to the loopback)."""
    return ALL_INTERFACES if _proxied(databricks) is not None else LOOPBACK


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


def tensorboard_url(port: int, databricks: DatabricksContext | None = None,
                    env: Mapping[str, str] | None = None) -> str:
    """The URL at which a browser reaches the TensorBoard listening on driver port ``port``.

    Args:
        port: the TensorBoard's port on the driver.
        databricks: where on Databricks the driver runs (``SparkBackend.databricks()``; None off
            Databricks).
        env: the environment to read (default ``os.environ``).

    Raises:
        ProxyPortError: on Databricks, for the port of the notebook's ipywidgets comm channel.
    """
    where = _proxied(databricks)
    if where is not None:
        if port == where.comm_port:
            from ..runtime.driver.spark.databricks import COMM_PORT_KEY

            raise ProxyPortError(
                f"port {port} is the notebook's ipywidgets comm channel on this Databricks cluster "
                f"({COMM_PORT_KEY}): start TensorBoard on another port, such as {DATABRICKS_PORTS.start}")
        return where.proxy_url(port)
    if has_jupyter_proxy():
        server = jupyter_server(env)
        if server is not None:
            return jupyter_proxy_url(server.get("base_url") or "/", port)
    return local_url(port)
