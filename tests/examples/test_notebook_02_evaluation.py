"""Example notebook 02 evaluates, headless (nbclient), the checkpoints of a run training in this
process, and the eval curves land in the run's TensorBoard."""

from __future__ import annotations

import os
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from tfos_notebook.notebook import TrainOptions, train

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TESTS, "tensorboard"))
from tbhelpers import wait_for_scalars  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.spark]

NOTEBOOK = os.path.join(os.path.dirname(TESTS), "example_notebooks", "02_concurrent_evaluation.ipynb")

# 01's model, trained by two nodes with a checkpoint per epoch; slowed down so that the notebook
# evaluates while the run trains.
TRAINING_CELL = '''
import time
import tensorflow as tf
from tfos_notebook.examples.digits import build_model, load_digits_split

x, y, _, _ = load_digits_split()
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = build_model()

class Slow(tf.keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        time.sleep(2)

ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(64)
model.fit(ds, epochs=args.epochs, steps_per_epoch=10, verbose=0, callbacks=ctx.callbacks(backup=False) + [Slow()])
'''


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_notebook_02_evaluates_each_checkpoint_of_a_training_run_into_its_tensorboard(
        local_spark, tmp_path, monkeypatch):
    monkeypatch.setenv("TFOS_NOTEBOOK_STATE_DIR", str(tmp_path / "state"))  # shared with the kernel
    monkeypatch.setenv("TFOS_EVAL_RUN", "digits_for_02")
    monkeypatch.setenv("TFOS_EVAL_EVERY", "0.5")
    options = TrainOptions(workers=2, epochs=3, model_dir=str(tmp_path / "model"), name="digits_for_02",
                           monitor="none")
    run = train(TRAINING_CELL, options, {}, spark=local_spark)
    try:
        nb = nbformat.read(NOTEBOOK, as_version=4)
        NotebookClient(nb, timeout=240, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
        run.wait(60)
        board = run.start_tensorboard(wait=True)
        points = wait_for_scalars(board.port, "eval", "accuracy", 3, timeout=60)
    finally:
        run.stop_tensorboard()
    assert [p[1] for p in points] == [1, 2, 3]
    assert points[-1][2] > 0.5
    runs, evaluate, last = nb.cells[4], nb.cells[8], nb.cells[10]
    assert "digits_for_02" in _text(runs)
    # headless, the next cell waits at once: the lines follow the launching cell, then the waiting one
    assert "[tfos] eval of digits_for_02: watching" in _text(evaluate)
    assert "[tfos] eval of digits_for_02: step 1  loss" in _text(evaluate) + _text(last)
    assert "finished: 3 checkpoints evaluated, 0 failed (run finished)" in _text(last)
    assert "epoch   3  accuracy" in _text(last) and f"TensorBoard: {board.url}" in _text(last)
