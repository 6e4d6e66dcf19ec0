"""The checkpoint scanner hands out only checkpoints whose writer is done with them, each once."""

from __future__ import annotations

import os
import time

from tfos_notebook.notebook.checkpoints import CheckpointScanner


def _write(path, data: bytes = b"x" * 100, age: float = 0.0) -> None:
    with open(path, "ab") as f:
        f.write(data)
    if age:
        t = time.time() - age
        os.utime(path, (t, t))


def _state(model_dir, *names: str) -> None:
    lines = [f'model_checkpoint_path: "{names[-1]}"'] + [f'all_model_checkpoint_paths: "{n}"' for n in names]
    tmp = model_dir / "checkpoint.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, model_dir / "checkpoint")  # as TensorFlow does: replaced atomically


def _steps(found) -> list[int]:
    return [c.step for c in found[0]]


def test_tf_checkpoint_is_handed_out_only_once_the_state_file_names_it(tmp_path):
    scanner = CheckpointScanner(str(tmp_path), settle=60.0)
    _write(tmp_path / "ckpt-0001.data-00000-of-00001")
    assert scanner.scan() == ([], ["ckpt-0001"])  # data without index: being written
    _write(tmp_path / "ckpt-0001.index")
    assert scanner.scan() == ([], ["ckpt-0001"])  # complete-looking, but not vouched for nor settled
    _state(tmp_path, "ckpt-0001")
    found, pending = scanner.scan()
    assert [(c.path, c.step, c.kind) for c in found] == [(os.path.join(str(tmp_path), "ckpt-0001"), 1, "tf")]
    assert pending == []
    assert scanner.scan() == ([], [])  # each once


def test_earlier_tf_checkpoints_count_as_written_once_a_later_one_is_named(tmp_path):
    scanner = CheckpointScanner(str(tmp_path), settle=60.0)
    for n in (1, 2, 3):
        _write(tmp_path / f"ckpt-{n}.data-00000-of-00001")
        _write(tmp_path / f"ckpt-{n}.index")
    _write(tmp_path / "ckpt-4.data-00000-of-00001")  # the next one, half-written
    _state(tmp_path, "ckpt-3")  # tf-keras names only the newest
    found, pending = scanner.scan()
    assert [c.step for c in found] == [1, 2, 3] and pending == ["ckpt-4"]


def test_a_sharded_tf_checkpoint_waits_for_every_shard(tmp_path):
    scanner = CheckpointScanner(str(tmp_path), settle=0.0)
    _write(tmp_path / "model-7.index", age=10)
    _write(tmp_path / "model-7.data-00000-of-00002", age=10)
    assert scanner.scan(final=True) == ([], ["model-7"])
    _write(tmp_path / "model-7.data-00001-of-00002", age=10)
    assert _steps(scanner.scan(final=True)) == [7]


def test_keras_file_is_read_only_after_it_stopped_changing_for_settle_seconds(tmp_path):
    scanner = CheckpointScanner(str(tmp_path), settle=1.0)
    path = tmp_path / "ckpt-0002.weights.h5"
    _write(path)
    assert scanner.scan() == ([], ["ckpt-0002.weights.h5"])  # just written
    _write(path, age=5)  # it grew since the last scan (h5py writes in place)
    assert scanner.scan() == ([], ["ckpt-0002.weights.h5"])
    found, _ = scanner.scan()  # unchanged since the last scan and old enough
    assert [(c.step, c.kind) for c in found] == [(2, "keras")]


def test_after_the_run_ended_a_settled_file_needs_no_second_look(tmp_path):
    scanner = CheckpointScanner(str(tmp_path), settle=1.0)
    _write(tmp_path / "final.keras", age=5)
    _write(tmp_path / "ckpt.index", age=5)
    _write(tmp_path / "ckpt.data-00000-of-00001", age=5)
    found, pending = scanner.scan(final=True)
    assert sorted(c.kind for c in found) == ["keras", "tf"] and pending == []
    assert sorted(c.step for c in found) == [1, 2]  # no number in the names: the order found


def test_missing_model_dir_and_unrelated_files_yield_nothing(tmp_path):
    assert CheckpointScanner(str(tmp_path / "not-yet")).scan(final=True) == ([], [])
    (tmp_path / "backup").mkdir()
    _write(tmp_path / "backup" / "ckpt-1.index", age=5)
    _write(tmp_path / "notes.txt", age=5)
    assert CheckpointScanner(str(tmp_path), settle=0).scan(final=True) == ([], [])
