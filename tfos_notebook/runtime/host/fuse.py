"""Databricks' FUSE mounts, through which TensorFlow and every other file API reach shared storage:
``/Volumes`` (Unity Catalog volumes, ``/Volumes/<catalog>/<schema>/<volume>/...``) and ``/dbfs``
(DBFS root and mounts, which Databricks deprecates; standard access mode and serverless compute
have no FUSE for them).

TensorFlow has no ``dbfs:`` filesystem, so a ``dbfs:/`` URI is opened through a mount:
``dbfs:/Volumes/x`` as ``/Volumes/x``, any other ``dbfs:/x`` as ``/dbfs/x``. A path under a mount is
used only where the mount is there, told as MLflow tells it (``mountpoint /dbfs``): from the mount
table, not from a directory of that name, which would be a directory on the host's own disk.
"""

from __future__ import annotations

import os
import re
import socket

from ...errors import TFOSError

DBFS_MOUNT = "/dbfs"
VOLUMES_MOUNT = "/Volumes"
MOUNTINFO = "/proc/self/mountinfo"
VOLUME_FORM = "/Volumes/<catalog>/<schema>/<volume>/..."


class FuseError(TFOSError, ValueError):
    """A path needs a Databricks FUSE mount that is not there on this host."""


def mount_points(mountinfo: str = MOUNTINFO) -> frozenset[str] | None:
    """The mount points of this process's mount namespace (None where there is no mount table)."""
    try:
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    # field 5 of each line is the mount point, with spaces and the like escaped as \\040 (octal)
    return frozenset(_unescape(line.split(" ")[4]) for line in lines if line.count(" ") >= 4)


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def fuse_root(path: str) -> str | None:
    """The mount ``path`` lies under (``/Volumes`` or ``/dbfs``), or None."""
    return next((root for root in (VOLUMES_MOUNT, DBFS_MOUNT) if path == root or path.startswith(root + "/")), None)


def is_mounted(root: str, path: str, mounts: frozenset[str] | None = None) -> bool:
    """Whether ``root``, or a directory between it and ``path`` (a volume mounted on its own), is a
    mount point."""
    mounts = mount_points() if mounts is None else mounts
    parts = path[len(root):].strip("/").split("/")
    candidates = [root] + [f"{root}/{'/'.join(parts[:i])}" for i in range(1, len(parts) + 1) if parts[0]]
    if mounts is None:  # no mount table (not Linux)
        return any(os.path.ismount(c) for c in candidates)
    return any(c in mounts for c in candidates)


def fuse_path(path: str, mounts: frozenset[str] | None = None) -> str:
    """``path`` as file APIs open it here: a ``dbfs:/`` URI mapped onto its mount; any path under
    ``/Volumes`` or ``/dbfs`` checked to be on its mount. Other paths and URIs are returned as they are.

    Raises:
        FuseError: the mount is not there on this host, naming the host and the fix.
    """
    local = path
    if path.startswith("dbfs:"):
        rest = "/" + path[len("dbfs:"):].lstrip("/")
        local = rest if fuse_root(rest) == VOLUMES_MOUNT else (DBFS_MOUNT + rest).rstrip("/")
    root = fuse_root(local)
    if root is None or is_mounted(root, local, mounts):
        return local
    host = socket.gethostname()
    if root == DBFS_MOUNT:
        raise FuseError(
            f"{path} cannot be opened on {host}: {DBFS_MOUNT} is not mounted there (standard access mode and "
            f"serverless compute have no FUSE for DBFS root or mounts, and new workspaces have no DBFS root): "
            f"keep the files in a Unity Catalog volume, {VOLUME_FORM}")
    raise FuseError(
        f"{path} cannot be opened on {host}: {VOLUMES_MOUNT} is not mounted there (Unity Catalog volumes need "
        f"Databricks Runtime 13.3 LTS or later, where {VOLUMES_MOUNT} is a FUSE mount): run on such a cluster, "
        "or give a path that every host shares")
