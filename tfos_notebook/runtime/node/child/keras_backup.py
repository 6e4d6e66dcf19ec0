"""``ctx.callbacks()``'s backup: Keras's BackupAndRestore, which also saves at the decommission
checkpoint's step (``savepoint.py``).

With tf-keras, when the epoch's length is known (``steps_per_epoch``, or a dataset of known
cardinality), the backup records the step within the epoch, and a relaunched ``fit`` resumes at
the step after the checkpoint (its optimizer's step count included); the resumed epoch runs its
remaining number of steps, drawing them from the start of its dataset (tf-keras keeps no position
in the data). Otherwise (an epoch of unknown length, or Keras 3, whose backup keeps only the epoch)
the decommission checkpoint resumes at the start of its epoch, whose steps run again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from .savepoint import SavePoint

AT_EPOCH_ENDS_ONLY = 2**62  # a batch-level save frequency that never comes: tf-keras then keeps the step within the epoch


class Backup(tf.keras.callbacks.BackupAndRestore):
    """A BackupAndRestore in ``backup_dir`` that backs up at each epoch's end and, through
    :class:`StepBoundary`, at the step the nodes agreed on after a decommission notice."""

    def __init__(self, backup_dir: str, legacy: bool) -> None:
        super().__init__(backup_dir)
        self.legacy = legacy
        self._epoch = 0

    def on_train_begin(self, logs: Any = None) -> None:
        if self.legacy and self.params.get("steps"):
            self.save_freq = AT_EPOCH_ENDS_ONLY  # read by tf-keras's training state, made here
        super().on_train_begin(logs)

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        super().on_epoch_begin(epoch, logs)
        self._epoch = epoch

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        super().on_epoch_end(epoch, logs)
        if self.save_freq == AT_EPOCH_ENDS_ONLY:  # the last batch is recorded: a relaunch starts the next epoch
            self._backup(epoch=epoch)

    def save_now(self) -> str:
        """The decommission checkpoint: within the epoch where tf-keras keeps the step, else as
        though the epoch before had just ended."""
        if self.legacy:
            if self.save_freq != AT_EPOCH_ENDS_ONLY:
                self._training_state._ckpt_saved_epoch.assign(self._epoch - 1)
            self._backup(epoch=self._epoch)
        else:
            self._current_epoch = self._epoch
            self._save_model()
        return self.backup_dir


class StepBoundary(tf.keras.callbacks.Callback):
    """Meets ``savepoint`` after every step, last of the callbacks (the others have seen the step),
    saving with ``save`` (``Backup.save_now``, then each of ``after``: the TensorBoard writers' flush,
    the staged copy's push). An epoch's last step is met at the epoch's end instead, once the other
    callbacks logged the epoch (its report, its TensorBoard summary), so that a checkpoint there loses
    none of them."""

    def __init__(self, savepoint: SavePoint, save: Callable[[], str], after: list[Callable[[], None]]) -> None:
        super().__init__()
        self.savepoint, self.save, self.after = savepoint, save, after
        self._supports_tf_logs = True  # the step's logs are never read: no sync with the device for them
        self._offset: int | None = None  # the optimizer's step before the epoch's batch 0

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self._offset = None

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if self._offset is None:  # once an epoch (a resumed epoch's first batch is not batch 0)
            self._offset = int(self.model.optimizer.iterations.numpy()) - (batch + 1)
        if batch + 1 != self.params.get("steps"):
            self.savepoint.boundary(self._offset + batch + 1, self._save)

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        steps = self.params.get("steps")
        if steps and self._offset is not None:
            self.savepoint.boundary(self._offset + steps, self._save)

    def _save(self) -> str:
        path = self.save()
        for then in self.after:
            then()
        return path
