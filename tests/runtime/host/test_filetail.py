import os

from tfos_notebook.runtime.host.filetail import DirTail


def _append(path, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "ab") as f:
        f.write(data)


def _as_dict(chunks):
    return {(c.relpath, c.offset): c.data for c in chunks}


def test_scan_returns_only_the_bytes_appended_since_the_last_scan(tmp_path):
    tail = DirTail(str(tmp_path))
    _append(tmp_path / "a", b"hello ")
    assert _as_dict(tail.scan()) == {("a", 0): b"hello "}
    _append(tmp_path / "a", b"world")
    assert _as_dict(tail.scan()) == {("a", 6): b"world"}
    assert tail.scan() == []


def test_root_that_appears_later_is_followed(tmp_path):
    root = tmp_path / "later"
    tail = DirTail(str(root))
    assert tail.scan() == []
    _append(root / "x", b"1")
    assert _as_dict(tail.scan()) == {("x", 0): b"1"}


def test_files_in_new_subdirectories_are_found_with_slash_separated_names(tmp_path):
    tail = DirTail(str(tmp_path))
    tail.scan()
    _append(tmp_path / "train" / "deep" / "events.1", b"abc")
    _append(tmp_path / "validation" / "events.2", b"de")
    assert _as_dict(tail.scan()) == {("train/deep/events.1", 0): b"abc", ("validation/events.2", 0): b"de"}


def test_one_scan_returns_at_most_max_bytes_and_the_next_continues(tmp_path):
    tail = DirTail(str(tmp_path), max_bytes=10)
    data = bytes(range(25))
    _append(tmp_path / "big", data)
    got = b""
    for _ in range(3):
        chunks = tail.scan()
        assert sum(len(c.data) for c in chunks) <= 10
        for c in chunks:
            assert c.offset == len(got)
            got += c.data
    assert got == data
    assert tail.scan() == []


def test_start_offset_resumes_a_file_from_where_a_receiver_stands(tmp_path):
    _append(tmp_path / "a", b"0123456789")
    tail = DirTail(str(tmp_path), start_offset=lambda rel: 4)
    assert _as_dict(tail.scan()) == {("a", 4): b"456789"}


def test_a_cold_file_that_grows_again_is_seen_within_cold_every_scans(tmp_path):
    for i in range(30):
        _append(tmp_path / f"f{i:02d}", b"x")
    tail = DirTail(str(tmp_path), hot_secs=0.0, cold_every=5)
    assert len(tail.scan()) == 30
    _append(tmp_path / "f17", b"late")
    chunks = [c for _ in range(5) for c in tail.scan()]
    assert _as_dict(chunks) == {("f17", 1): b"late"}


def test_full_scan_checks_every_file_at_once(tmp_path):
    for i in range(30):
        _append(tmp_path / f"f{i:02d}", b"x")
    tail = DirTail(str(tmp_path), hot_secs=0.0, cold_every=1000)
    tail.scan()
    for i in range(30):
        _append(tmp_path / f"f{i:02d}", b"y")
    assert len(tail.scan(full=True)) == 30


def test_rewind_sends_a_file_again_from_the_requested_offset(tmp_path):
    _append(tmp_path / "a", b"abcdef")
    tail = DirTail(str(tmp_path))
    tail.scan()
    tail.rewind("a", 2)
    assert _as_dict(tail.scan()) == {("a", 2): b"cdef"}


def test_a_file_that_shrinks_is_no_longer_followed(tmp_path, caplog):
    _append(tmp_path / "a", b"abcdef")
    tail = DirTail(str(tmp_path))
    tail.scan()
    with open(tmp_path / "a", "wb") as f:
        f.write(b"xy")
    assert tail.scan() == []
    assert "shrank from 6 to 2 bytes" in caplog.text
    _append(tmp_path / "a", b"zzzzzzzzz")
    assert tail.scan() == []


def test_removed_directories_and_files_are_forgotten(tmp_path):
    _append(tmp_path / "run" / "a", b"1")
    _append(tmp_path / "b", b"2")
    tail = DirTail(str(tmp_path))
    tail.scan()
    (tmp_path / "run" / "a").unlink()
    (tmp_path / "run").rmdir()
    (tmp_path / "b").unlink()
    tail.scan()
    assert tail.offsets == {}


def test_the_newest_file_of_each_directory_is_checked_on_every_scan_however_long_it_paused(tmp_path):
    old = 1_000_000_000
    for i in range(20):
        _append(tmp_path / "run" / f"events.{i:02d}", b"x")
        os.utime(tmp_path / "run" / f"events.{i:02d}", (old + i, old + i))  # events.19 is the newest
    tail = DirTail(str(tmp_path), hot_secs=0.0, cold_every=1000)
    tail.scan()
    _append(tmp_path / "run" / "events.19", b"epoch")
    _append(tmp_path / "run" / "events.03", b"stale writer")
    assert _as_dict(tail.scan()) == {("run/events.19", 1): b"epoch"}
    assert _as_dict(tail.scan(full=True)) == {("run/events.03", 1): b"stale writer"}


def test_at_most_max_hot_files_are_checked_every_scan_besides_those_with_unread_bytes(tmp_path):
    for i in range(50):
        _append(tmp_path / f"d{i:02d}" / "events", b"x")  # 50 directories: 50 newest files, all recent
    tail = DirTail(str(tmp_path), max_hot=5, cold_every=1000)
    assert len(tail.scan()) == 50  # unread bytes: all read at once
    for i in range(50):
        _append(tmp_path / f"d{i:02d}" / "events", b"y")
    assert len(tail.scan()) == 5 + 1  # the 5 hottest and a slice of the 45 others


def test_a_file_added_without_moving_its_directory_mtime_is_found_within_cold_every_scans(tmp_path):
    """As on NFS or the /dbfs FUSE mount, where adding a file may leave the directory's mtime as is."""
    _append(tmp_path / "run" / "a", b"1")
    old = 1_000_000_000
    os.utime(tmp_path / "run", (old, old))
    tail = DirTail(str(tmp_path), cold_every=3)
    tail.scan()
    _append(tmp_path / "run" / "b", b"2")
    os.utime(tmp_path / "run", (old, old))
    chunks = [c for _ in range(3) for c in tail.scan()]
    assert _as_dict(chunks) == {("run/b", 0): b"2"}
