"""Findings about the Databricks compute the driver runs on, said before the launch (a rule of
``diagnose``)."""

from __future__ import annotations

from ..events.finding import WARNING, Finding
from ..spark.databricks import PROFILE_KEY, AccessMode, DatabricksContext

STANDARD_COMPUTE = "https://docs.databricks.com/compute/access-mode-limitations.html"
GPU_SCHEDULING = "https://docs.databricks.com/compute/gpu.html"


def compute_findings(where: DatabricksContext | None, gpus_per_node: int) -> list[Finding]:
    """What is known not to work on the Databricks compute the driver runs on, said before the
    launch: standard access mode and serverless compute run user code and UDFs in sandboxes
    (Lakeguard), and nothing shows a task there opening a connection to the notebook, which every
    node needs; standard compute offers no GPUs; single-node compute schedules none."""
    if where is None:
        return []
    if where.access_mode not in (AccessMode.STANDARD, AccessMode.SERVERLESS):
        return _single_node_gpus(where, gpus_per_node)
    sandbox = ("user code and UDFs run in isolated sandboxes (Lakeguard), and no public source shows a task there "
               "opening a TCP connection to the notebook, which every node needs for its control channel")
    if where.access_mode is AccessMode.SERVERLESS:
        return [Finding(
            code="databricks_serverless",
            cause="this notebook runs on Databricks serverless compute, where training is not expected to work",
            evidence=(f"serverless compute: {where.access_mode_source}", f"on serverless compute {sandbox}",
                      "serverless compute offers Spark Connect only, and no FUSE for DBFS root (/dbfs)"),
            remedy="attach the notebook to a classic cluster in dedicated (single user) access mode, with a "
                   "Databricks Runtime for ML for TensorFlow and GPUs",
            severity=WARNING,
        )]
    findings = [Finding(
        code="databricks_standard_access",
        cause="this notebook runs on a Databricks cluster in standard access mode, where training is not expected "
              "to work",
        evidence=(f"standard access mode: {where.access_mode_source}", f"on standard compute {sandbox}",
                  f"standard compute offers no GPUs, no Databricks Runtime for ML and no FUSE for DBFS root or "
                  f"mounts (/dbfs) ({STANDARD_COMPUTE})"),
        remedy="use a cluster in dedicated (single user) access mode with a Databricks Runtime for ML; keep files in "
               "a Unity Catalog volume (/Volumes/<catalog>/<schema>/<volume>/...)",
        severity=WARNING,
    )]
    if gpus_per_node:
        findings.append(Finding(
            code="databricks_no_gpus",
            cause=f"{gpus_per_node} GPU(s) per node were asked for, but Databricks standard access mode offers no "
                  "GPUs",
            evidence=(f"standard access mode: {where.access_mode_source}",),
            remedy="use a GPU cluster in dedicated (single user) access mode, or launch without GPUs",
        ))
    return findings


def _single_node_gpus(where: DatabricksContext, gpus_per_node: int) -> list[Finding]:
    """GPUs asked of Spark on a single-node cluster, where Databricks turns GPU scheduling off: its
    tasks get no GPU addresses, so no node could be given one."""
    if not (where.single_node and gpus_per_node):
        return []
    return [Finding(
        code="databricks_single_node_gpus",
        cause=f"{gpus_per_node} GPU(s) per node were asked of Spark, but Databricks does not schedule GPUs on "
              "single-node compute: its tasks get no GPU addresses",
        evidence=(f"single-node cluster (Databricks Runtime {where.runtime_version}: {PROFILE_KEY}=singleNode or "
                  "no workers)", f"GPU scheduling: {GPU_SCHEDULING}"),
        remedy="use a multi-node GPU cluster (one node per worker's GPUs), or launch one node without --gpus and "
               "let TensorFlow use the driver's GPUs itself (MirroredStrategy in a single node)",
    )]
