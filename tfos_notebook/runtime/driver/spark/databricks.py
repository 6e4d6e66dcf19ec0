"""Where on Databricks this driver runs: runtime version, access mode, cluster and workspace ids,
the host name the browser uses, and the ipywidgets comm channel's port.

Read as MLflow reads it (``mlflow/utils/databricks_utils.py``): the runtime version from
``DATABRICKS_RUNTIME_VERSION`` (or ``/databricks/DBR_VERSION``), a serverless runtime's version
starting with ``client.``; each other field from the notebook's REPL context
(``dbruntime.databricks_repl_context.get_context()``) first, and from the Spark conf's cluster
usage tags when the context lacks it. Every read tolerates failure: on some compute
``spark.conf.get(key, default)`` raises ``[CONFIG_NOT_AVAILABLE]`` instead of returning the default
(databricks/databricks-sdk-py#1112), and ``dbruntime`` exists only on Databricks.

A process that is not on Databricks compute (no runtime version) has no context: a Databricks
Connect client on a laptop reads the cluster's tags, but its TensorBoard runs on the laptop.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

log = logging.getLogger(__name__)

#: A conf lookup, ``key -> value or None`` (``SparkBackend.conf``); it may raise.
ConfLookup = Callable[[str], Any]

RUNTIME_VERSION_ENV = "DATABRICKS_RUNTIME_VERSION"
RUNTIME_VERSION_FILE = "/databricks/DBR_VERSION"
SERVERLESS_PREFIX = "client."
CLUSTER_ID_KEY = "spark.databricks.clusterUsageTags.clusterId"
ORG_ID_KEYS = ("spark.databricks.clusterUsageTags.clusterOwnerOrgId", "spark.databricks.clusterUsageTags.orgId")
WORKSPACE_URL_KEY = "spark.databricks.workspaceUrl"
ACCESS_MODE_KEYS = ("spark.databricks.clusterUsageTags.dataSecurityMode",
                    "spark.databricks.clusterUsageTags.clusterDataSecurityMode")
COMM_PORT_KEY = "spark.databricks.driver.ipykernel.commChannelPort"
#: A single-node cluster: its profile (the Clusters API's ``spark_conf``), and its worker count tag.
PROFILE_KEY = "spark.databricks.cluster.profile"
WORKERS_KEY = "spark.databricks.clusterUsageTags.clusterWorkers"
DEFAULT_COMM_PORT = 6062


class AccessMode(str, Enum):
    """How the compute isolates its users (the Clusters API's ``data_security_mode``)."""

    DEDICATED = "dedicated"  # single user: the classic Spark architecture, SparkContext and GPUs
    STANDARD = "standard"  # shared: Spark Connect, user code and UDFs in sandboxes (Lakeguard)
    SERVERLESS = "serverless"
    NO_ISOLATION = "no isolation shared"  # legacy: the classic architecture, shared by several users

    def __str__(self) -> str:
        return self.value


#: The Clusters API's ``data_security_mode`` values (databricks-sdk-py ``compute.DataSecurityMode``).
DATA_SECURITY_MODES = {
    "SINGLE_USER": AccessMode.DEDICATED, "DATA_SECURITY_MODE_DEDICATED": AccessMode.DEDICATED,
    "LEGACY_SINGLE_USER": AccessMode.DEDICATED, "LEGACY_SINGLE_USER_STANDARD": AccessMode.DEDICATED,
    "USER_ISOLATION": AccessMode.STANDARD, "DATA_SECURITY_MODE_STANDARD": AccessMode.STANDARD,
    "LEGACY_TABLE_ACL": AccessMode.STANDARD, "LEGACY_PASSTHROUGH": AccessMode.STANDARD,
    "NONE": AccessMode.NO_ISOLATION,
}


@dataclass(frozen=True)
class DatabricksContext:
    """This driver's place on Databricks.

    Attributes:
        runtime_version: ``DATABRICKS_RUNTIME_VERSION`` (``15.4``; ``client.1.1`` on serverless).
        access_mode: dedicated, standard, serverless or no isolation shared.
        access_mode_source: what the access mode was told by (the conf key and its value, or the
            kind of Spark session), for evidence lines.
        cluster_id, workspace_id: the ids in the driver proxy's path (None when unknown).
        browser_host: the host name at which the browser opens the workspace (None when unknown).
        comm_port: the driver port of the notebook's ipywidgets comm channel.
        single_node: a single-node cluster (no workers: Spark runs in local mode on the driver,
            where Databricks does not schedule GPUs).
    """

    runtime_version: str
    access_mode: AccessMode
    access_mode_source: str = ""
    cluster_id: str | None = None
    workspace_id: str | None = None
    browser_host: str | None = None
    comm_port: int = DEFAULT_COMM_PORT
    single_node: bool = False

    @property
    def autologs_by_default(self) -> bool:
        """Whether MLflow autologging is on by default here: on clusters, not on serverless compute."""
        return self.access_mode is not AccessMode.SERVERLESS

    @property
    def has_driver_proxy(self) -> bool:
        """Whether the cluster's driver proxy can serve a port of this driver: a cluster (not
        serverless) whose ids are known."""
        return self.access_mode is not AccessMode.SERVERLESS and bool(self.cluster_id and self.workspace_id)

    def proxy_path(self, port: int) -> str:
        """``/driver-proxy/o/<workspace id>/<cluster id>/<port>/``: where the driver proxy serves ``port``."""
        return f"/driver-proxy/o/{self.workspace_id}/{self.cluster_id}/{port}/"

    def proxy_url(self, port: int) -> str:
        """The driver proxy's URL of ``port`` on the browser's host (its path alone when the host is unknown)."""
        host = (self.browser_host or "").removeprefix("https://").rstrip("/")
        return f"https://{host}{self.proxy_path(port)}" if host else self.proxy_path(port)


def runtime_version(env: Mapping[str, str] | None = None, version_file: str = RUNTIME_VERSION_FILE) -> str | None:
    """The Databricks Runtime version this process runs on, or None off Databricks."""
    env = os.environ if env is None else env
    if env.get(RUNTIME_VERSION_ENV):
        return env[RUNTIME_VERSION_ENV]
    try:
        with open(version_file) as f:
            return f.read().strip() or None
    except OSError:
        return None


def repl_context() -> Any:
    """The notebook's REPL context (``dbruntime``), or None where there is none."""
    try:
        from dbruntime.databricks_repl_context import get_context

        return get_context()
    except Exception as e:  # not on Databricks, or a runtime without it
        log.debug("no Databricks REPL context: %s", e)
        return None


def read_conf(conf: ConfLookup | None, key: str) -> str | None:
    """``conf(key)`` as a non-empty string, or None when unset or when reading it raises
    (``[CONFIG_NOT_AVAILABLE]``, a server that will not show it)."""
    if conf is None:
        return None
    try:
        value = conf(key)
    except Exception as e:
        log.debug("cannot read the conf %s: %s", key, e)
        return None
    return str(value) if value not in (None, "") else None


def read_context(conf: ConfLookup | None, *, connect: bool, env: Mapping[str, str] | None = None,
                 repl: Any = None, version_file: str = RUNTIME_VERSION_FILE) -> DatabricksContext | None:
    """The context of a driver whose Spark conf is ``conf`` (None when there is no Spark), on a
    Spark Connect session or not; None off Databricks. ``repl`` is the REPL context (default:
    ``repl_context()``)."""
    version = runtime_version(env, version_file)
    if version is None:
        return None
    repl = repl_context() if repl is None else repl

    def field(attribute: str, *keys: str) -> str | None:
        try:
            value = getattr(repl, attribute, None)
        except Exception as e:  # a context whose attribute raises
            log.debug("cannot read the REPL context's %s: %s", attribute, e)
            value = None
        if value not in (None, ""):
            return str(value)
        return next((v for v in (read_conf(conf, k) for k in keys) if v), None)

    mode, source = _access_mode(version, conf, connect)
    port = read_conf(conf, COMM_PORT_KEY)
    single = read_conf(conf, PROFILE_KEY) == "singleNode" or read_conf(conf, WORKERS_KEY) == "0"
    return DatabricksContext(
        runtime_version=version, access_mode=mode, access_mode_source=source,
        cluster_id=field("clusterId", CLUSTER_ID_KEY), workspace_id=field("workspaceId", *ORG_ID_KEYS),
        browser_host=field("browserHostName") or field("workspaceUrl", WORKSPACE_URL_KEY),
        comm_port=int(port) if port and port.isdigit() else DEFAULT_COMM_PORT, single_node=single)


def _access_mode(version: str, conf: ConfLookup | None, connect: bool) -> tuple[AccessMode, str]:
    """Serverless by its runtime version; else the cluster's ``data_security_mode`` tag; else, as
    MLflow decides, standard on a Spark Connect session and dedicated on a classic one."""
    if version.startswith(SERVERLESS_PREFIX):
        return AccessMode.SERVERLESS, f"Databricks Runtime {version}"
    for key in ACCESS_MODE_KEYS:
        value = read_conf(conf, key)
        if value and value.upper() in DATA_SECURITY_MODES:
            return DATA_SECURITY_MODES[value.upper()], f"{key}={value}"
    if connect:
        return AccessMode.STANDARD, f"a Spark Connect session on Databricks Runtime {version}"
    return AccessMode.DEDICATED, f"a classic Spark session on Databricks Runtime {version}"
