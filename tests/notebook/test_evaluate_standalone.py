"""``%%tfos_evaluate`` in a second kernel evaluates the checkpoints of a run training on the
standalone cluster while it trains, and its curves appear in the run's TensorBoard as run ``eval``."""

from __future__ import annotations

import os
import queue
import time

import pytest
from jupyter_client import KernelManager
from nbhelpers import TRAINING_HELPERS
from tbhelpers import wait_for_scalars

from tfos_notebook.notebook import TrainOptions, train
from tfos_notebook.runtime.driver.events import RunFinished

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Two workers, a checkpoint per epoch (ctx.callbacks()), epochs slowed down so that evaluation
# runs while the run trains.
SLOW_TRAINING_CELL = '''
import time
import tensorflow as tf
x, y = load_digits_arrays()
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = build_model()
ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(64)

class Slow(tf.keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        time.sleep(3)

model.fit(ds, epochs=args.epochs, steps_per_epoch=10, verbose=0,
          callbacks=ctx.callbacks(backup=False) + [Slow()])
'''

EVALUATION_CELL = '''%%tfos_evaluate evalrun --every 0.5
model = checkpoint.restore(build_model())
loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
return {"loss": loss, "accuracy": accuracy}
'''


class Kernel:
    """A real IPython kernel of this venv, with its outputs grouped by the cell that caused them."""

    def __init__(self, env: dict[str, str]) -> None:
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.streams: dict[str, str] = {}

    def run(self, code: str, timeout: float = 120.0) -> dict:
        """Run a cell; returns its execute reply (outputs keep being collected by ``drain``)."""
        msg_id = self.kc.execute(code)
        reply = self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.kc.get_shell_msg(timeout=timeout)
        self.drain(0.5)
        reply["msg_id"] = msg_id
        return reply

    def drain(self, secs: float) -> None:
        deadline = time.monotonic() + secs
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=0.1)
            except queue.Empty:
                continue
            parent = msg["parent_header"].get("msg_id", "")
            if msg["msg_type"] == "stream":
                self.streams[parent] = self.streams.get(parent, "") + msg["content"]["text"]
            elif msg["msg_type"] == "error":
                self.streams[parent] = self.streams.get(parent, "") + "\n".join(msg["content"]["traceback"])

    def stop(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def test_a_second_kernel_evaluates_each_checkpoint_while_the_run_trains_into_its_tensorboard(
        standalone, tmp_path):
    user_ns: dict = {}
    exec(TRAINING_HELPERS, user_ns)
    options = TrainOptions(workers=2, epochs=4, model_dir=str(tmp_path / "model"), name="evalrun",
                           monitor="none")
    env = {**os.environ, "PYTHONPATH": REPO, "TFOS_MONITOR": "text"}  # the state dir is shared
    kernel = Kernel(env)
    try:
        run = train(SLOW_TRAINING_CELL, options, user_ns, spark=standalone)
        reply = kernel.run("%load_ext tfos_notebook\n" + TRAINING_HELPERS +
                           "from sklearn.model_selection import train_test_split\n"
                           "x, y = load_digits_arrays()\n"
                           "x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=0)\n")
        assert reply["content"]["status"] == "ok", kernel.streams
        launch = kernel.run(EVALUATION_CELL)
        assert launch["content"]["status"] == "ok", kernel.streams.get(launch["msg_id"])
        run.wait(300)
        board = run.start_tensorboard(wait=True)
        points = wait_for_scalars(board.port, "eval", "accuracy", 4, timeout=120)
        waited = kernel.run("_.wait(120)")
        assert waited["content"]["status"] == "ok", kernel.streams.get(waited["msg_id"])
    finally:
        kernel.stop()
    assert [p[1] for p in points] == [1, 2, 3, 4]  # one point per epoch's checkpoint, at its epoch
    assert points[-1][2] > 0.5  # the restored weights are the trained ones
    ended = run.events.events(RunFinished)[-1].t
    assert points[0][0] < ended  # evaluated while the run was still training
    assert wait_for_scalars(board.port, "chief_0/train", "epoch_loss", 4)  # beside the training curves
    # the lines follow the launching cell, and the cell that waits while it waits
    lines = kernel.streams[launch["msg_id"]] + kernel.streams.get(waited["msg_id"], "")
    assert "[tfos] eval of evalrun: step 1  loss" in kernel.streams[launch["msg_id"]]
    assert "[tfos] eval of evalrun: finished: 4 checkpoints evaluated, 0 failed (run finished)" in lines
