import os
import random

import pytest

from tfos_notebook.runtime.host.filetail import Chunk
from tfos_notebook.tensorboard.mirror import Mirror, UnsafePathError
from tfos_notebook.tensorboard.sources import LocalSource, LogdirError, open_source
from tfos_notebook.tensorboard.sync import MirrorSync


def _tree(root) -> dict[str, bytes]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root).replace(os.sep, "/")] = f.read()
    return out


def _grow(root, rng: random.Random, names: list[str], rounds: int) -> None:
    for _ in range(rounds):
        name = rng.choice(names)
        path = os.path.join(root, *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "ab") as f:
            f.write(rng.randbytes(rng.randint(1, 5000)))


NAMES = ["chief_0/train/events.out.tfevents.1", "chief_0/validation/events.out.tfevents.2",
         "worker_0/events.out.tfevents.3", "eval/events.out.tfevents.4"]


def _mirror_while_growing(sync: MirrorSync, src, rng: random.Random, passes: int, rounds: int) -> None:
    """Grow the files under ``src`` between ``passes`` mirror passes, then make a last full pass."""
    for _ in range(passes):
        _grow(src, rng, NAMES, rounds=rounds)
        sync.tick()
    sync.tick(full=True)


def test_mirror_files_stay_byte_identical_to_growing_sources(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "mirror"
    rng = random.Random(1)
    sync = MirrorSync(Mirror(str(dst)))
    sync.add(LocalSource(str(src)))
    _mirror_while_growing(sync, src, rng, passes=20, rounds=5)
    assert _tree(dst) == _tree(src)


def test_mirror_appends_in_place_and_never_replaces_a_file(tmp_path):
    mirror = Mirror(str(tmp_path))
    mirror.append("run/events", 0, b"abc")
    inode = os.stat(tmp_path / "run" / "events").st_ino
    mirror.append("run/events", 3, b"def")
    assert os.stat(tmp_path / "run" / "events").st_ino == inode
    assert (tmp_path / "run" / "events").read_bytes() == b"abcdef"


def test_mirror_restarted_mid_run_resumes_without_duplicating_or_losing_bytes(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "mirror"
    rng = random.Random(2)
    first = MirrorSync(Mirror(str(dst)))
    first.add(LocalSource(str(src)))
    _grow(src, rng, NAMES, rounds=30)
    first.tick()
    first.stop(final_tick=False)
    _grow(src, rng, NAMES, rounds=30)  # written while no mirror runs
    second = MirrorSync(Mirror(str(dst)))  # a new process would start exactly like this
    second.add(LocalSource(str(src)))
    _grow(src, rng, NAMES, rounds=30)
    second.tick(full=True)
    assert _tree(dst) == _tree(src)


def test_resent_bytes_are_trimmed_and_a_gap_asks_for_the_missing_offset(tmp_path):
    mirror = Mirror(str(tmp_path))
    assert mirror.receive("worker_0", [Chunk("ev", 0, b"0123")]) == {}
    assert mirror.receive("worker_0", [Chunk("ev", 2, b"23456")]) == {}  # overlaps: only 456 is new
    assert mirror.receive("worker_0", [Chunk("ev", 0, b"0123")]) == {}  # a resend: nothing changes
    assert mirror.receive("worker_0", [Chunk("ev", 9, b"9")]) == {"ev": 7}  # 7 and 8 never arrived
    assert (tmp_path / "worker_0" / "ev").read_bytes() == b"0123456"
    assert mirror.size("worker_0/ev") == 7


@pytest.mark.parametrize("name", ["../escape", "a/../../escape", "/etc/passwd", "a//b", "./a", "a/.",
                                  "..\\escape", "C:escape", "a\x00b", ""])
def test_names_that_could_leave_the_mirror_are_rejected(tmp_path, name, caplog):
    root = tmp_path / "mirror"
    mirror = Mirror(str(root))
    with pytest.raises(UnsafePathError, match="refused file name"):
        mirror.append(name, 0, b"x")
    assert mirror.receive("worker_0", [Chunk(name, 0, b"x"), Chunk("ok", 0, b"y")]) == {}
    assert mirror.rejected == 1 and "refused file name" in caplog.text
    assert _tree(tmp_path) == {"mirror/worker_0/ok": b"y"}


def test_a_symlink_inside_the_mirror_cannot_lead_writes_outside(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "mirror"
    root.mkdir()
    (root / "worker_0").symlink_to(outside, target_is_directory=True)
    mirror = Mirror(str(root))
    with pytest.raises(UnsafePathError, match="outside the mirror"):
        mirror.append("worker_0/ev", 0, b"x")
    assert list(outside.iterdir()) == []


def test_fsspec_source_mirrors_a_file_url(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "mirror"
    rng = random.Random(3)
    source = open_source(f"file://{src}", backend="fsspec")
    assert type(source).__name__ == "FsspecSource"
    sync = MirrorSync(Mirror(str(dst)))
    sync.add(source)
    _mirror_while_growing(sync, src, rng, passes=5, rounds=4)
    assert _tree(dst) == _tree(src)


def test_fsspec_source_mirrors_an_in_memory_filesystem(tmp_path):
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/tfos-test-logs/chief_0/events.1", b"first")
    sync = MirrorSync(Mirror(str(tmp_path)))
    sync.add(open_source("memory://tfos-test-logs"))
    sync.tick()
    with fs.open("/tfos-test-logs/chief_0/events.1", "ab") as f:
        f.write(b" and more")
    sync.tick()
    fs.rm("/tfos-test-logs", recursive=True)
    assert (tmp_path / "chief_0" / "events.1").read_bytes() == b"first and more"


def test_hadoop_file_uri_is_mirrored_through_the_spark_jvm(tmp_path, local_spark):
    src, dst = tmp_path / "src", tmp_path / "mirror"
    rng = random.Random(4)
    source = open_source(f"file://{src}", sc=local_spark.sparkContext)
    assert type(source).__name__ == "HadoopSource"
    sync = MirrorSync(Mirror(str(dst)))
    sync.add(source)
    assert sync.tick() == 0  # the directory does not exist yet
    _mirror_while_growing(sync, src, rng, passes=5, rounds=4)
    assert _tree(dst) == _tree(src)


def test_a_uri_nothing_can_read_is_refused_with_the_fix(tmp_path):
    with pytest.raises(LogdirError, match="pass sc= to read Hadoop URIs through Spark"):
        open_source("hdfs://namenode:8020/runs/x")
    with pytest.raises(LogdirError, match="is a URI, not a local path"):
        open_source("s3://bucket/runs", backend="local")
