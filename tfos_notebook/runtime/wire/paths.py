"""Paths both ends read the same way: which URIs are shared storage (Databricks' FUSE mounts
included, see ``fuse.py``), the local path of a plain path or ``file://`` URI, and the name of a
node's log directory."""

from __future__ import annotations

import urllib.parse

from .fuse import VOLUME_FORM, fuse_root

HADOOP_SCHEMES = ("adl://", "abfs://", "abfss://", "dbfs:/", "file://", "gs://", "hdfs://", "oss://", "s3://",
                  "s3a://", "s3n://", "swift://", "viewfs://", "wasb://", "wasbs://")

SHARED_STORAGE = (f"a Unity Catalog volume ({VOLUME_FORM}), hdfs://, s3a://, gs://, abfss://, dbfs:/ (or /dbfs/...), "
                  "or a directory mounted at the same path on every host and the driver (NFS)")


def is_shared_logdir(path: str | None) -> bool:
    """Whether a run's log directory is storage the nodes and the driver share (a URI such as
    ``hdfs://``, ``dbfs:/``, ``s3a://``, or a path under Databricks' ``/Volumes`` or ``/dbfs``
    FUSE mounts): nodes then write there directly and the driver mirrors it. A plain path or a
    ``file://`` URI is a directory on each node's own disk (each host has its own ``file://``),
    whose new bytes the nodes ship to the driver over the control channel."""
    return bool(path) and local_path(path) is None


def local_path(path: str | None) -> str | None:
    """The filesystem path of a plain path or ``file://`` URI (paths under ``/Volumes`` and ``/dbfs``
    excepted: Databricks' FUSE mounts are shared by definition), else None (``hdfs://``,
    ``dbfs:/``, ``s3a://``...)."""
    if not path or path.startswith("dbfs:") or fuse_root(path):
        return None
    if path.startswith("file:"):
        return urllib.parse.urlparse(path).path or "/"
    return None if "://" in path else path


def node_dir_name(role: str, index: int) -> str:
    """The log subdirectory (and TensorBoard run) of one node: ``chief_0``, ``worker_1``..."""
    return f"{role}_{index}"
