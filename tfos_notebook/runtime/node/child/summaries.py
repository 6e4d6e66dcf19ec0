"""Node-side TensorBoard helpers behind ``ctx.summary_writer()`` and ``ctx.callbacks()``.

Imported only inside a node's child process, when the user's function asks for them: this module
imports TensorFlow. TensorFlow's summary writers flush every 120 s by default and only when they
write; here every writer is flushed at most ``flush_secs`` after a point is written, so the
driver's TensorBoard stays live.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
import time
import weakref
from typing import Any

import tensorflow as tf

from ...host.fuse import fuse_root
from ...host.versions import is_keras2

log = logging.getLogger(__name__)


class Flusher:
    """Flushes registered summary writers every ``interval`` seconds until ``close()``, which
    runs at process exit."""

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self._writers: weakref.WeakSet = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="tfos-summary-flush")
        self._thread.start()
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the periodic flushes (after one last flush of every writer)."""
        self._closed.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        self.flush()

    def add(self, writer) -> None:
        with self._lock:
            self._writers.add(writer)

    def flush(self) -> None:
        with self._lock:
            writers = list(self._writers)
        for writer in writers:
            try:
                writer.flush()
            except Exception as e:  # a closed writer: nothing left to flush
                log.debug("summary writer not flushed: %s", e)

    def _loop(self) -> None:
        while not self._closed.wait(self.interval):
            self.flush()


def create_writer(logdir: str, flusher: Flusher):
    """A ``tf.summary`` file writer on ``logdir`` that ``flusher`` keeps flushed."""
    writer = tf.summary.create_file_writer(logdir, flush_millis=max(1, int(flusher.interval * 1000)))
    flusher.add(writer)
    return writer


def _legacy_keras() -> bool:
    """Whether ``tf.keras`` is Keras 2 (tf-keras, ``TF_USE_LEGACY_KERAS=1``, or TensorFlow's own before
    2.16) rather than Keras 3."""
    return is_keras2(tf.keras.__name__)


class NodeTensorBoard(tf.keras.callbacks.TensorBoard):
    """Keras's TensorBoard callback, writing on every node into that node's own ``ctx.log_dir``.

    Under a multi-worker strategy tf-keras writes only the chief's summaries where asked; every
    other node's go to a ``workertemp_<n>`` directory beside them (deleted at the end of training),
    so a worker's curves would show in TensorBoard as ``worker_0/workertemp_0/train``. Each node
    here already has a directory of its own, so the callback writes there on every node and the
    curves read ``worker_0/train``. (Keras 3's callback has no such redirect.)
    """

    def _get_log_write_dir(self) -> str:
        return self.log_dir


class FlushOnEpoch(tf.keras.callbacks.Callback):
    """Flushes a Keras TensorBoard callback's writers right after it writes epoch summaries.

    Keras keeps its writers in the callback's ``_writers`` dict (tf-keras and Keras 3 alike); if a
    release changes that, summaries still arrive, at TensorFlow's default 120 s flush.
    """

    def __init__(self, board) -> None:
        super().__init__()
        self.board = board

    def flush(self) -> None:
        for writer in list(getattr(self.board, "_writers", {}).values()):
            writer.flush()

    def on_epoch_end(self, epoch, logs=None) -> None:
        self.flush()

    def on_test_end(self, logs=None) -> None:
        self.flush()


class FlushOnBatch(FlushOnEpoch):
    """Also flushes at most every ``interval`` seconds during an epoch (``update_freq`` per batch)."""

    def __init__(self, board, interval: float) -> None:
        super().__init__(board)
        self.interval = interval
        self._last = time.monotonic()

    def on_train_batch_end(self, batch, logs=None) -> None:
        if time.monotonic() - self._last >= self.interval:
            self._last = time.monotonic()
            self.flush()


class ReportProgress(tf.keras.callbacks.Callback):
    """Sends each epoch's metrics to the driver's monitor through ``ctx.report``."""

    def __init__(self, ctx) -> None:
        super().__init__()
        self.ctx = ctx

    def on_epoch_end(self, epoch, logs=None) -> None:
        metrics = {}
        for k, v in (logs or {}).items():
            try:
                metrics[k] = float(v)
            except (TypeError, ValueError):
                continue
        self.ctx.report(epoch + 1, **metrics)


class StepTimer(tf.keras.callbacks.Callback):
    """Times the training for the node's :class:`~.pace.Pace` at no cost per step.

    It has no batch hook (with one, Keras calls every callback at every step): the pace's own
    thread reads the optimizer's step counter (``optimizer.iterations``, public in tf-keras and
    Keras 3) once a second; the epochs come from ``on_epoch_begin``.
    """

    def __init__(self, pace, batch_size: int = 0) -> None:
        super().__init__()
        self.pace, self.batch_size = pace, batch_size

    def on_train_begin(self, logs=None) -> None:
        iterations = self.model.optimizer.iterations
        self.pace.count(lambda: int(iterations.numpy()), self.batch_size)

    def on_epoch_begin(self, epoch, logs=None) -> None:
        self.pace.epoch(epoch, int(self.params.get("epochs") or 0), int(self.params.get("steps") or 0))

    def on_train_end(self, logs=None) -> None:
        self.pace.count(None)


class StagedDir:
    """A directory on a Databricks FUSE mount (a Unity Catalog volume: ``/Volumes/...``) that Keras 3
    writes through a local one. A volume takes a file written whole from its start, and refuses
    appends, writes out of order and writes into an existing file; Keras 3 saves weights as ``.h5``
    files, which HDF5 writes out of order. So Keras saves into ``local``, and each new or changed
    file is then copied to ``remote`` whole, from its start (a file rewritten, as a backup is, is
    written anew); files gone from ``local`` go from ``remote`` too. Keras 2 (tf-keras) writes
    TensorFlow checkpoints, which a volume takes as they are.

    Every node saves the same weights (its checkpoints and backup), but only the chief's copy is
    pushed (``pushes``): two nodes copying and removing the same files of one volume folder at once
    would race each other (one node's backup removed at its training's end under the other's
    copy). Every node pulls, so each resumes from the chief's backup."""

    def __init__(self, remote: str, pushes: bool = True) -> None:
        self.remote, self.pushes = remote, pushes
        self.local = tempfile.mkdtemp(prefix="tfos-staged-", dir=os.getcwd())  # in the node's work folder
        self._copied: dict[str, tuple[int, int]] = {}  # relpath -> (size, mtime_ns) last copied

    def pull(self) -> None:
        """Copy what ``remote`` holds (a backup to resume from) into ``local``."""
        if os.path.isdir(self.remote):
            shutil.copytree(self.remote, self.local, dirs_exist_ok=True)
            self._copied = self._files(self.local)

    def push(self) -> None:
        """Copy each file of ``local`` new or changed since the last push to ``remote``, whole; remove
        from ``remote`` the files ``local`` no longer holds (on the chief only: see the class)."""
        if not self.pushes:
            return
        now = self._files(self.local)
        for rel, stamp in now.items():
            if self._copied.get(rel) != stamp:
                os.makedirs(os.path.dirname(os.path.join(self.remote, rel)), exist_ok=True)
                shutil.copyfile(os.path.join(self.local, rel), os.path.join(self.remote, rel))
        for rel in self._copied.keys() - now.keys():
            try:
                os.remove(os.path.join(self.remote, rel))
            except FileNotFoundError:
                pass
        self._copied = now

    @staticmethod
    def _files(root: str) -> dict[str, tuple[int, int]]:
        out = {}
        for folder, _, names in os.walk(root):
            for name in names:
                st = os.stat(os.path.join(folder, name))
                out[os.path.relpath(os.path.join(folder, name), root)] = (st.st_size, st.st_mtime_ns)
        return out


class PullStaged(tf.keras.callbacks.Callback):
    """First of the callbacks: brings what the staged directories hold remotely to their local side."""

    def __init__(self, staged: list[StagedDir]) -> None:
        super().__init__()
        self.staged = staged

    def on_train_begin(self, logs=None) -> None:
        for s in self.staged:
            s.pull()


class PushStaged(tf.keras.callbacks.Callback):
    """Last of the callbacks: copies what the others saved locally to the staged directories' remote side."""

    def __init__(self, staged: list[StagedDir]) -> None:
        super().__init__()
        self.staged = staged

    def on_epoch_end(self, epoch, logs=None) -> None:
        for s in self.staged:
            s.push()

    def on_train_end(self, logs=None) -> None:
        self.on_epoch_end(-1)


def keras_callbacks(ctx, pace, savepoint, tensorboard: bool = True, checkpoint: bool = True, progress: bool = True,
                    backup: bool = True, flush_secs: float = 1.0, timing: bool = True, batch_size: int = 0,
                    **tensorboard_args: Any) -> list:
    """See ``NodeContext.callbacks``; ``pace`` and ``savepoint``: the node's ``pace.Pace`` and
    ``savepoint.SavePoint`` (None outside a node's process)."""
    callbacks: list = []
    # Keras 3's .h5 weights reach a Databricks FUSE mount through a local folder (see StagedDir)
    model_dir = ctx.model_dir.rstrip("/") if ctx.model_dir else None
    staged = StagedDir(model_dir, ctx.is_chief) if model_dir and fuse_root(model_dir) and not _legacy_keras() else None
    save_dir = staged.local if staged is not None else model_dir
    if staged is not None:
        callbacks.append(PullStaged([staged]))
    if timing and pace is not None:
        callbacks.append(StepTimer(pace, batch_size))
    backup_cb = None
    if backup and model_dir and ctx.model_dir_shared:
        from .keras_backup import Backup

        backup_cb = Backup(f"{save_dir}/backup", _legacy_keras())
        callbacks.append(backup_cb)
    if tensorboard:
        board = NodeTensorBoard(log_dir=ctx.log_dir, **tensorboard_args)
        per_batch = tensorboard_args.get("update_freq", "epoch") != "epoch"
        callbacks += [board, FlushOnBatch(board, flush_secs) if per_batch else FlushOnEpoch(board)]
    if checkpoint and model_dir:
        suffix = "" if _legacy_keras() else ".weights.h5"
        callbacks.append(tf.keras.callbacks.ModelCheckpoint(f"{save_dir}/ckpt-{{epoch:04d}}{suffix}",
                                                            save_weights_only=True))
    if progress:
        callbacks.append(ReportProgress(ctx))
    if staged is not None:
        callbacks.append(PushStaged([staged]))
    if backup_cb is not None and savepoint is not None:  # last: every other callback has seen the step
        from .keras_backup import StepBoundary

        after = [FlushOnEpoch(board).flush] if tensorboard else []  # the node's process ends after the save
        callbacks.append(StepBoundary(savepoint, backup_cb.save_now, [*after, *([staged.push] if staged else [])]))
    return callbacks
