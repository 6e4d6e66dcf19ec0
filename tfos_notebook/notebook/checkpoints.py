"""Finds the checkpoints of a model directory that are completely written, each once.

Training writes checkpoints while evaluation reads them, so a checkpoint is handed out only when
its writer is done with it:

- a TensorFlow checkpoint (``ckpt-0003.index`` + ``ckpt-0003.data-00000-of-00001``, from
  ``tf.train.Checkpoint``, ``CheckpointManager`` or tf-keras ``ModelCheckpoint``) once it is named
  in the directory's ``checkpoint`` state file, which TensorFlow replaces atomically after the data
  and index files are written, or once a later checkpoint is named there; without a state file
  (``Checkpoint.write``), once its index and every data shard exist and none changed for ``settle``
  seconds;
- a Keras file (``ckpt-0003.weights.h5``, ``.h5``, ``.keras``), written in place, once its size and
  modification time stayed the same between two scans and for ``settle`` seconds.

Only the directory's top level is read (``BackupAndRestore`` keeps its own files in ``backup/``).
Local paths are read with ``os``, ``dbfs:/`` URIs through Databricks' FUSE mounts (as TensorFlow
reads them); other URIs (``s3://``, ``gs://``, ``hdfs://``...) through fsspec.
This module imports no TensorFlow until :meth:`Checkpoint.restore` is called.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from ..runtime.host.fuse import fuse_path

STATE_FILE = "checkpoint"
KERAS_SUFFIXES = (".weights.h5", ".h5", ".keras")
_DATA = re.compile(r"^(?P<prefix>.+)\.data-(?P<shard>\d+)-of-(?P<shards>\d+)$")
_STATE_ENTRY = re.compile(r'^\s*(?:all_)?model_checkpoint_paths?:\s*"(?P<path>.*)"\s*$', re.MULTILINE)
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class Checkpoint:
    """One complete checkpoint.

    Attributes:
        path: what TensorFlow and Keras load: the prefix of a TensorFlow checkpoint
            (``.../ckpt-0003``), or the Keras file (``.../ckpt-0003.weights.h5``).
        step: the number in its name (the epoch with ``ctx.callbacks()``; the save counter with
            ``CheckpointManager``), or its position among the checkpoints found when it has none.
        kind: ``tf`` or ``keras``.
    """

    path: str
    step: int
    kind: str

    def restore(self, model: Any) -> Any:
        """Load this checkpoint's weights into ``model`` (a Keras model built like the trained one)
        and return the model.

        Handles weights saved by Keras (``model.save_weights``, ``ModelCheckpoint``, ``ctx.callbacks()``)
        and ``tf.train.Checkpoint(model=model)`` checkpoints (as ``ctx.restore`` reads them);
        optimizer slots in the checkpoint are ignored.
        """
        if self.kind == "keras":
            model.load_weights(self.path)
            return model
        import tensorflow as tf

        names = [name for name, _shape in tf.train.list_variables(self.path)]
        if any(name.startswith("model/") for name in names):  # tf.train.Checkpoint(model=model)
            tf.train.Checkpoint(model=model).restore(self.path).expect_partial()
        else:
            status = model.load_weights(self.path)
            if hasattr(status, "expect_partial"):
                status.expect_partial()
        return model


@dataclass
class _Group:
    """The files of one checkpoint as listed: ``{name: (size, mtime)}``."""

    kind: str
    name: str  # the prefix (tf) or file name (keras)
    files: dict[str, tuple[int, float]] = field(default_factory=dict)
    shards: int | None = None  # data shards a tf checkpoint needs

    @property
    def complete(self) -> bool:
        if self.kind == "keras":
            return True
        data = [n for n in self.files if _DATA.match(n)]
        return f"{self.name}.index" in self.files and self.shards is not None and len(data) >= self.shards

    @property
    def mtime(self) -> float:
        return max(mtime for _size, mtime in self.files.values())

    @property
    def signature(self) -> tuple:
        return tuple(sorted(self.files.items()))


class CheckpointScanner:
    """Hands out each complete checkpoint of ``model_dir`` once, oldest step first.

    Args:
        model_dir: the run's model directory (it may not exist yet).
        settle: seconds a file must be left unchanged before it counts as written (for files no
            state file vouches for).

    Raises:
        FuseError: ``model_dir`` needs a Databricks mount (``/Volumes``, ``/dbfs``) this driver lacks.
    """

    def __init__(self, model_dir: str, settle: float = 2.0) -> None:
        self.model_dir, self.settle = model_dir, settle
        self._seen: set[tuple[str, float]] = set()
        self._previous: dict[str, tuple] = {}  # group name -> its signature at the last scan
        self._fs = None
        if "://" in model_dir:
            from fsspec.core import url_to_fs

            self._fs, self._root = url_to_fs(model_dir)
        else:
            self._root = fuse_path(model_dir)

    # -- listing ---------------------------------------------------------------------------------
    def _list(self) -> dict[str, tuple[int, float]]:
        """``{file name: (size, mtime)}`` of the top level (empty while the directory is missing)."""
        if self._fs is None:
            found = {}
            try:
                entries = list(os.scandir(self._root))
            except (FileNotFoundError, NotADirectoryError):
                return {}
            for entry in entries:
                try:
                    if entry.is_file():
                        st = entry.stat()
                        found[entry.name] = (st.st_size, st.st_mtime)
                except FileNotFoundError:  # deleted between listing and stat (max_to_keep)
                    continue
            return found
        try:
            entries = self._fs.ls(self._root, detail=True)
        except FileNotFoundError:
            return {}
        found = {}
        for e in entries:
            if e.get("type") == "file":
                mtime = e.get("mtime") or e.get("LastModified") or e.get("updated") or 0.0
                if hasattr(mtime, "timestamp"):
                    mtime = mtime.timestamp()
                found[e["name"].rstrip("/").rsplit("/", 1)[-1]] = (int(e.get("size") or 0), float(mtime))
        return found

    def _read_state(self) -> set[str]:
        """Checkpoint names the ``checkpoint`` state file lists (base names)."""
        path = f"{self._root.rstrip('/')}/{STATE_FILE}"
        try:
            if self._fs is None:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            else:
                text = self._fs.cat_file(path).decode("utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
            return set()
        return {m.group("path").rstrip("/").rsplit("/", 1)[-1] for m in _STATE_ENTRY.finditer(text)}

    def _groups(self, listing: dict[str, tuple[int, float]]) -> dict[str, _Group]:
        groups: dict[str, _Group] = {}
        for name, stat in listing.items():
            data = _DATA.match(name)
            if name.endswith(".index") or data:
                prefix = data.group("prefix") if data else name[: -len(".index")]
                group = groups.setdefault(prefix, _Group("tf", prefix))
                group.files[name] = stat
                if data:
                    group.shards = int(data.group("shards"))
            elif name.endswith(KERAS_SUFFIXES):
                groups[name] = _Group("keras", name, {name: stat})
        return groups

    # -- scanning --------------------------------------------------------------------------------
    def _path(self, name: str) -> str:
        return f"{self.model_dir.rstrip('/')}/{name}" if self._fs is not None else os.path.join(self._root, name)

    def scan(self, final: bool = False, now: float | None = None) -> tuple[list[Checkpoint], list[str]]:
        """New complete checkpoints (oldest step first), and the names of those still being written.

        Args:
            final: the run has ended, so nothing more will be written: a checkpoint counts as
                written once its files are ``settle`` seconds old, even if no earlier scan saw it.
        """
        now = time.time() if now is None else now
        listing = self._list()
        named = self._read_state() if STATE_FILE in listing else set()
        groups = self._groups(listing)
        vouched_step = max((n for n in map(_number, named & groups.keys()) if n is not None), default=-1)
        ready, pending = [], []
        for name, group in groups.items():
            key = (name, group.mtime)
            if key in self._seen:
                continue
            old_enough = now - group.mtime >= self.settle
            unchanged = self._previous.get(name) == group.signature
            step = _number(name)
            vouched = group.kind == "tf" and (name in named or (step is not None and step < vouched_step))
            if group.complete and (vouched or (old_enough and (unchanged or final))):
                ready.append(group)
            else:
                pending.append(name)
        self._previous = {name: g.signature for name, g in groups.items()}
        ready.sort(key=lambda g: (_number(g.name) if _number(g.name) is not None else -1, g.mtime))
        found = []
        for group in ready:
            self._seen.add((group.name, group.mtime))
            step = _number(group.name)
            found.append(Checkpoint(self._path(group.name), step if step is not None else len(self._seen), group.kind))
        return found, sorted(pending)


def _number(name: str) -> int | None:
    """The last number in a checkpoint's name without its suffixes (``ckpt-0003.weights.h5`` -> 3)."""
    for suffix in (*KERAS_SUFFIXES, ".index"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    numbers = _NUMBER.findall(name)
    return int(numbers[-1]) if numbers else None
