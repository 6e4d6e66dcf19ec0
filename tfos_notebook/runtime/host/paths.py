"""Paths both ends read the same way: which URIs are shared storage (Databricks' FUSE mounts
included, see ``fuse.py``), the local path of a plain path or ``file://`` URI, the name of a node's
log directory and of its profiler traces, and a path resolved against the default filesystem as TensorFlowOnSpark does
(``ctx.absolute_path``, ``TFNode.hdfs_path``)."""

from __future__ import annotations

import getpass
import os
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


def work_prefix(run_id: str, task: int | str) -> str:
    """How the names of a node's own temporary folders on its host begin (its work folder, its
    partition's spill): ``tfos-RUN_ID-TASK-``."""
    return f"tfos-{run_id}-{task}-"


def spill_prefix(run_id: str, task: int | str, node_pid: int) -> str:
    """How the name of a fed node's partition spill begins: ``tfos-RUN_ID-TASK-spill-PID-``, PID
    the node's process (the Spark task's Python worker), so that once that process is gone its
    child can tell its node's spill from that of a later attempt on the same host."""
    return f"{work_prefix(run_id, task)}spill-{node_pid}-"


def node_dir_name(role: str, index: int) -> str:
    """The log subdirectory (and TensorBoard run) of one node: ``chief_0``, ``worker_1``..."""
    return f"{role}_{index}"


def absolute_path(default_fs: str, working_dir: str, path: str) -> str:
    """Resolve ``path`` against the cluster's default filesystem, as TensorFlowOnSpark does.

    A path with a scheme is returned as is, and so is a path under Databricks' FUSE mounts
    (``/Volumes/...``, ``/dbfs/...``: a local path on every node, which ``dbfs:/`` as prefix would
    break); another absolute path gets
    the default filesystem as prefix; a relative path resolves to the user's home on HDFS, or to
    the driver's working directory on a local filesystem.
    """
    if path.startswith(HADOOP_SCHEMES) or fuse_root(path):
        return path
    # one trailing slash goes ("hdfs://nn:8020/", "file:///"), not the empty authority of "hdfs://"
    fs = default_fs[:-1] if default_fs.endswith("/") and not default_fs.endswith("://") else default_fs
    if path.startswith("/"):
        return f"{fs}{path}"
    if fs.startswith(("hdfs://", "viewfs://")):
        return f"{fs}/user/{getpass.getuser()}/{path}"
    if fs.startswith("file:"):
        return f"file://{working_dir.rstrip('/')}/{path}"
    return f"{fs}/{path}"


def trace_path(root: str, session: str, node: str) -> str:
    """Where a node's trace of ``session`` goes under ``root`` (what TensorBoard's Profile tab reads)."""
    return os.path.join(root, "plugins", "profile", session, f"{node}.xplane.pb")


def is_trace_of(relpath: str, node_dir: str) -> bool:
    """Whether ``relpath`` is a profiler trace of the node whose directory is ``node_dir``:
    ``plugins/profile/<session>/<node_dir>.xplane.pb``."""
    parts = relpath.split("/")
    return len(parts) == 4 and parts[:2] == ["plugins", "profile"] and parts[3] == f"{node_dir}.xplane.pb"
