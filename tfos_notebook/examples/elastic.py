"""A small tf-keras job for spot-safe runs: a fixed number of steps under
MultiWorkerMirroredStrategy, backed up by ``ctx.callbacks()``, each step taking at least
``step_secs`` so that a decommission notice lands mid-epoch. The decommission tests and
``bench/decommission.py`` run it."""

from __future__ import annotations

STEPS_PER_EPOCH = 30
EPOCHS = 4


def train(args, ctx):
    """Fit ``EPOCHS`` epochs of ``STEPS_PER_EPOCH`` steps. ``args``: ``step_secs``, and ``trace``: a
    directory where each node writes the step it just finished, to ``<attempt>-<role><index>``
    (optional). Returns the optimizer's final step count, the step this attempt began at and the
    training nodes it ran with."""
    import os
    import time

    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(8, activation="relu"),
                                     tf.keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(STEPS_PER_EPOCH * 8, 4)).astype("float32")
    y = rng.normal(size=(STEPS_PER_EPOCH * 8, 1)).astype("float32")
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(8).repeat().with_options(options)
    trace = os.path.join(args["trace"], f"{ctx.attempt}-{ctx.job_name}{ctx.task_index}") if args.get("trace") else None
    seen = {}

    class Steps(tf.keras.callbacks.Callback):  # before ctx.callbacks(): it sees a step before the boundary holds
        def on_train_batch_end(self, batch, logs=None):
            if "start" not in seen or trace:
                step = int(self.model.optimizer.iterations.numpy())
                seen.setdefault("start", step - 1)
                if trace:
                    with open(trace, "w") as f:
                        f.write(str(step))
            time.sleep(args["step_secs"])

    model.fit(data, epochs=EPOCHS, steps_per_epoch=STEPS_PER_EPOCH, verbose=0,
              callbacks=[Steps(), *ctx.callbacks(checkpoint=False)])
    return {"final": int(model.optimizer.iterations.numpy()), "start": seen["start"], "workers": ctx.num_workers,
            "attempt": ctx.attempt}
