"""Databricks as this test environment cannot be: the REPL context, the runtime version and Spark
confs of Databricks compute, faked from values that public sources recorded. Each shape says where
its values come from; none was read on Databricks by this project.

- Ids and host names of an AWS workspace: the notebook and TensorBoard URLs quoted in
  Arize-ai/phoenix#953 (``dbc-f0b05a54-473d.cloud.databricks.com``, org ``1018391329803962``,
  cluster ``0112-220452-osc8oiar``).
- Those of an Azure workspace: the example of an R package's ``rstudio_server_url``
  (``adb-1234567812345678.12.azuredatabricks.net``, ``1234-123456-1234abcd``).
- A Google Cloud workspace's host: the form of Databricks' "Workspace instance names, URLs, and IDs"
  page for GCP (``<workspace id>.<n>.gcp.databricks.com``, its example id ``1234567890123456``).
- The REPL context's attribute names (``clusterId``, ``workspaceId``, ``browserHostName``,
  ``workspaceUrl``): MLflow's ``databricks_utils.py`` and notebooks that print them.
- ``data_security_mode`` values: databricks-sdk-py's ``compute.DataSecurityMode``.
- A serverless runtime version starts with ``client.`` (MLflow); its conf reads raise
  ``[CONFIG_NOT_AVAILABLE]`` (databricks/databricks-sdk-py#1112, quoted below).
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field

from pyspark.errors import AnalysisException

AWS = {"clusterId": "0112-220452-osc8oiar", "workspaceId": "1018391329803962",
       "browserHostName": "dbc-f0b05a54-473d.cloud.databricks.com",
       "workspaceUrl": "dbc-f0b05a54-473d.cloud.databricks.com"}
AZURE = {"clusterId": "1234-123456-1234abcd", "workspaceId": "1234567890123456",
         "browserHostName": "adb-1234567812345678.12.azuredatabricks.net",
         "workspaceUrl": "adb-1234567812345678.12.azuredatabricks.net"}
GCP = {"clusterId": "0923-164208-meows279", "workspaceId": "1234567890123456",
       "browserHostName": "1234567890123456.7.gcp.databricks.com",
       "workspaceUrl": "1234567890123456.7.gcp.databricks.com"}
SERVERLESS = {"clusterId": None, "workspaceId": "1018391329803962",
              "browserHostName": "dbc-f0b05a54-473d.cloud.databricks.com"}


def config_not_available(key: str) -> AnalysisException:
    """What ``spark.conf.get(key, default)`` raises on serverless compute (databricks-sdk-py#1112)."""
    return AnalysisException(message=f"[CONFIG_NOT_AVAILABLE] Configuration {key} is not available. SQLSTATE: 42K0I")


@dataclass
class RaisingConf:
    """A conf lookup that knows ``values`` and raises ``[CONFIG_NOT_AVAILABLE]`` for any other key,
    as Databricks' ``spark.conf.get`` does even when given a default."""

    values: dict[str, str] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def __call__(self, key: str) -> str:
        self.asked.append(key)
        if key in self.values:
            return self.values[key]
        raise config_not_available(key)


def install_repl_context(monkeypatch, attributes: dict | None) -> None:
    """Make ``dbruntime.databricks_repl_context.get_context()`` importable and return an object
    with ``attributes`` (or None)."""
    context = None if attributes is None else types.SimpleNamespace(**attributes)
    package = types.ModuleType("dbruntime")
    module = types.ModuleType("dbruntime.databricks_repl_context")
    module.get_context = lambda: context
    package.databricks_repl_context = module
    monkeypatch.setitem(sys.modules, "dbruntime", package)
    monkeypatch.setitem(sys.modules, "dbruntime.databricks_repl_context", module)


def on_databricks(monkeypatch, version: str, attributes: dict | None) -> None:
    """This process as a Databricks notebook's: the runtime version in the environment, and a
    REPL context with ``attributes``."""
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", version)
    install_repl_context(monkeypatch, attributes)
