"""Where a run's files go, decided on the driver: relative paths made absolute here, the run's own
log directory, and whether its model directory is shared by the driver and every node.

A path such as ``/tmp/model`` names a different directory on each host: checkpoints land on the
chief's host only, the driver cannot evaluate them, and a relaunch whose chief moved to another
host resumes unevenly. URIs (``hdfs://``, ``dbfs:/``, ``s3a://``...) and paths under Databricks'
FUSE mounts (``/Volumes/...``, ``/dbfs/...``) are shared by definition; for a local path (or
``file://`` URI) the driver writes a probe file into it before the launch, each node says at
registration whether it sees that file, and the nodes are told the verdict with the cluster spec
(``ctx.model_dir_shared``).
"""

from __future__ import annotations

import logging
import os

from ...host.fuse import FuseError, fuse_path, fuse_root
from ...host.paths import local_path

log = logging.getLogger(__name__)


def resolve_on_driver(path: str | None) -> str | None:
    """``path`` with a relative local path made absolute against the driver's working directory
    (a node would otherwise resolve it inside its own temporary work directory)."""
    local = local_path(path)
    if local is None or os.path.isabs(local):
        return path
    return os.path.abspath(local)


def run_log_dir(log_dir: str | None, run_id: str) -> str | None:
    """The directory one run writes its events to: ``<log_dir>/<run_id>``, so that a re-run never
    appends to the curves of the last one, while TensorBoard on ``log_dir`` itself still shows
    every run side by side (as ``<run_id>/chief_0``...). None stays None (a temporary directory)."""
    if not log_dir:
        return None
    return f"{log_dir.rstrip('/')}/{run_id}"


def write_probe(model_dir: str | None, run_id: str) -> str | None:
    """Write the probe file of ``run_id`` into ``model_dir`` when it is a local path; returns the
    probe's path (None for shared URIs). A probe the driver cannot write is still returned: no
    node will see it, which is the truth (the driver cannot read that directory either).

    The model dir is made on the driver, as the probe makes a local one, also under Databricks'
    ``/Volumes`` and ``/dbfs`` mounts where the driver has them (no probe there: they are shared)."""
    local = local_path(model_dir)
    if local is None:
        _make_mounted(model_dir)
        return None
    probe = os.path.join(local, f".tfos-probe-{run_id}")
    try:
        os.makedirs(local, exist_ok=True)
        with open(probe, "w") as f:
            f.write(run_id)
    except OSError as e:
        log.warning("run %s: cannot write into the model dir %s on the driver: %s", run_id, local, e)
    return probe


def _make_mounted(model_dir: str | None) -> None:
    try:
        path = fuse_path(model_dir) if model_dir else None
    except FuseError as e:  # the nodes say so for themselves, and fail with the fix
        log.debug("model dir %s: %s", model_dir, e)
        return
    if path and fuse_root(path):
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            log.warning("cannot make the model dir %s on the driver: %s", path, e)


def remove_probe(probe: str | None) -> None:
    if probe is None:
        return
    try:
        os.remove(probe)
    except OSError as e:  # never written, or already gone
        log.debug("probe file %s: %s", probe, e)
