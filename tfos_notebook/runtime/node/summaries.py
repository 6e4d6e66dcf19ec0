"""Node-side TensorBoard helpers behind ``ctx.summary_writer()`` and ``ctx.callbacks()``.

Imported only inside a node's child process, when the user's function asks for them: this module
imports TensorFlow. TensorFlow's summary writers flush every 120 s by default and only when they
write; here every writer is flushed at most ``flush_secs`` after a point is written, so the
driver's TensorBoard stays live.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from typing import Any

import tensorflow as tf

from ..wire.versions import is_keras2

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

    def _flush(self) -> None:
        for writer in list(getattr(self.board, "_writers", {}).values()):
            writer.flush()

    def on_epoch_end(self, epoch, logs=None) -> None:
        self._flush()

    def on_test_end(self, logs=None) -> None:
        self._flush()


class FlushOnBatch(FlushOnEpoch):
    """Also flushes at most every ``interval`` seconds during an epoch (``update_freq`` per batch)."""

    def __init__(self, board, interval: float) -> None:
        super().__init__(board)
        self.interval = interval
        self._last = time.monotonic()

    def on_train_batch_end(self, batch, logs=None) -> None:
        if time.monotonic() - self._last >= self.interval:
            self._last = time.monotonic()
            self._flush()


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


def keras_callbacks(ctx, pace, tensorboard: bool = True, checkpoint: bool = True, progress: bool = True,
                    backup: bool = True, flush_secs: float = 1.0, timing: bool = True, batch_size: int = 0,
                    **tensorboard_args: Any) -> list:
    """See ``NodeContext.callbacks``; ``pace``: the node's ``pace.Pace`` (None outside a node's process)."""
    callbacks: list = []
    if timing and pace is not None:
        callbacks.append(StepTimer(pace, batch_size))
    if backup and ctx.model_dir and ctx.model_dir_shared:
        callbacks.append(tf.keras.callbacks.BackupAndRestore(f"{ctx.model_dir.rstrip('/')}/backup"))
    if tensorboard:
        board = NodeTensorBoard(log_dir=ctx.log_dir, **tensorboard_args)
        per_batch = tensorboard_args.get("update_freq", "epoch") != "epoch"
        callbacks += [board, FlushOnBatch(board, flush_secs) if per_batch else FlushOnEpoch(board)]
    if checkpoint and ctx.model_dir:
        suffix = "" if _legacy_keras() else ".weights.h5"
        path = f"{ctx.model_dir.rstrip('/')}/ckpt-{{epoch:04d}}{suffix}"
        callbacks.append(tf.keras.callbacks.ModelCheckpoint(path, save_weights_only=True))
    if progress:
        callbacks.append(ReportProgress(ctx))
    return callbacks
