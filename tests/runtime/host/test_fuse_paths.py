"""Paths under Databricks' FUSE mounts (/Volumes, /dbfs) and dbfs:/ URIs, as TensorFlow opens them,
with the mount table faked (a ``mountinfo`` file written here). No Spark."""

from __future__ import annotations

import socket

import pytest

from tfos_notebook.runtime.host.fuse import FuseError, fuse_path, is_mounted, mount_points
from tfos_notebook.runtime.host.paths import is_shared_logdir, local_path
from tfos_notebook.runtime.node.child.ctx import NodeContext, absolute_path

# two lines of a Databricks driver's mount table as /proc/self/mountinfo writes them (fields made up;
# the mount points are the documented ones), and a volume mounted on its own, with a space in its name
MOUNTINFO = ("1049 1036 0:95 / /dbfs rw,nosuid,nodev,relatime - fuse /dbfs rw,user_id=0\n"
             "1050 1036 0:96 / /Volumes rw,nosuid,nodev,relatime - fuse /Volumes rw,user_id=0\n")
ONE_VOLUME = "1051 1036 0:97 / /Volumes/main/ml/my\\040vol rw - fuse x rw\n"


def mounts(tmp_path, text: str) -> frozenset[str]:
    (tmp_path / "mountinfo").write_text(text)
    return mount_points(str(tmp_path / "mountinfo"))


def test_dbfs_uris_reach_tensorflow_through_their_mounts(tmp_path):
    table = mounts(tmp_path, MOUNTINFO)
    assert table >= {"/dbfs", "/Volumes"}
    assert fuse_path("dbfs:/Volumes/main/ml/runs/x", table) == "/Volumes/main/ml/runs/x"
    assert fuse_path("dbfs:/tfos/model", table) == "/dbfs/tfos/model"
    assert fuse_path("dbfs:///tfos/model/", table) == "/dbfs/tfos/model"
    assert fuse_path("/Volumes/main/ml/runs/x", table) == "/Volumes/main/ml/runs/x"
    assert fuse_path("hdfs://nn/x", table) == "hdfs://nn/x" and fuse_path("/tmp/x", table) == "/tmp/x"


def test_a_missing_dbfs_mount_is_a_clear_error_naming_the_host_and_volumes(tmp_path):
    table = mounts(tmp_path, "")  # standard access mode or serverless: no FUSE for DBFS root
    with pytest.raises(FuseError) as info:
        fuse_path("dbfs:/tfos/model", table)
    assert str(info.value) == (
        f"dbfs:/tfos/model cannot be opened on {socket.gethostname()}: /dbfs is not mounted there (standard access "
        "mode and serverless compute have no FUSE for DBFS root or mounts, and new workspaces have no DBFS root): "
        "keep the files in a Unity Catalog volume, /Volumes/<catalog>/<schema>/<volume>/...")
    with pytest.raises(FuseError, match=r"^/Volumes/main/ml/x cannot be opened on .*: /Volumes is not mounted there "
                                        r"\(Unity Catalog volumes need Databricks Runtime 13\.3 LTS or later"):
        fuse_path("/Volumes/main/ml/x", table)


def test_a_directory_named_dbfs_is_not_a_mount_but_a_volume_mounted_on_its_own_is(tmp_path):
    table = mounts(tmp_path, ONE_VOLUME)
    assert is_mounted("/Volumes", "/Volumes/main/ml/my vol/runs", table)
    assert not is_mounted("/Volumes", "/Volumes/main/ml/other/runs", table)
    assert not is_mounted("/dbfs", "/dbfs/x", frozenset({"/", "/tmp"}))


def test_volumes_are_shared_storage_and_keep_their_path_on_a_dbfs_default_filesystem():
    assert is_shared_logdir("/Volumes/main/ml/runs") and local_path("/Volumes/main/ml/model") is None
    assert is_shared_logdir("dbfs:/Volumes/main/ml/runs") and not is_shared_logdir("/tmp/runs")
    assert absolute_path("dbfs:/", "/w", "/Volumes/main/ml/data") == "/Volumes/main/ml/data"
    assert absolute_path("dbfs:/", "/w", "/data/x") == "dbfs:/data/x"


def test_ctx_absolute_path_hands_tensorflow_a_mounted_path_or_says_why_not(monkeypatch):
    ctx = NodeContext("r", 0, "chief", 0, {"chief": ["h:1"]}, defaultFS="dbfs:/")
    monkeypatch.setattr("tfos_notebook.runtime.host.fuse.mount_points", lambda: frozenset({"/dbfs"}))
    assert ctx.absolute_path("/data/x") == "/dbfs/data/x"
    monkeypatch.setattr("tfos_notebook.runtime.host.fuse.mount_points", lambda: frozenset())
    with pytest.raises(FuseError, match=r"^dbfs:/data/x cannot be opened on "):
        ctx.absolute_path("/data/x")
