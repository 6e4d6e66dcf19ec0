"""Train a small Keras classifier on scikit-learn's digits (1,797 real 8x8 images, the offline
stand-in for MNIST) with MultiWorkerMirroredStrategy, in InputMode.TENSORFLOW: every node loads the
data itself and tf.data shards it across the workers. The example notebooks reuse the data
helpers (``load_images`` also reads real MNIST) and ``build_model``.

Runs on tf-keras (``TF_USE_LEGACY_KERAS=1``, which the nodes set when tf-keras is installed):
Keras 3's multi-worker ``fit`` is broken upstream.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass


@dataclass
class DigitsArgs:
    epochs: int = 3
    batch_size: int = 64
    learning_rate: float = 0.01
    test_size: int = 297
    seed: int = 0
    export_dir: str | None = None  # the chief saves the trained model there (SavedModel)


def load_digits_split(test_size: int = 297, seed: int = 0):
    """(x_train, y_train, x_test, y_test) as float32 in [0, 1] and int64 labels, shuffled with ``seed``."""
    import numpy as np
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = (x[order] / 16.0).astype("float32"), y[order].astype("int64")
    return x[test_size:], y[test_size:], x[:test_size], y[:test_size]


def load_images(mnist_path: str | None = None, test_size: int = 297, seed: int = 0):
    """(x_train, y_train, x_test, y_test), flattened float32 images in [0, 1] and int64 labels:
    real MNIST from ``mnist_path`` (see ``examples.mnist``) when given, else scikit-learn's digits."""
    if mnist_path:
        from .mnist import load_mnist

        return load_mnist(mnist_path)
    return load_digits_split(test_size, seed)


def list_column(matrix, dtype: str):
    """The rows of a 2-D array as an Arrow column of lists (Spark's ``array<...>``), built on the
    array's buffer (pyarrow 8, Databricks 14.3's, cannot cast a fixed-size list to a list)."""
    import numpy as np
    import pyarrow as pa

    flat = pa.array(np.ascontiguousarray(matrix, dtype=dtype).ravel())
    offsets = pa.array(np.arange(0, len(flat) + 1, matrix.shape[1], dtype="int32"))
    return pa.ListArray.from_arrays(offsets, flat)


def to_dataframe(spark, x, y):
    """A DataFrame ``id long, pixels array<float>, label long`` of the images ``x`` and labels ``y``,
    moved to Spark through Arrow."""
    import numpy as np
    import pyarrow as pa

    from ..runtime.driver.spark.frames import arrow_frame

    return arrow_frame(spark, pa.table({"id": pa.array(np.arange(len(x), dtype="int64")),
                                        "pixels": list_column(x, "float32"), "label": pa.array(np.asarray(y, "int64"))}))


def build_model(learning_rate: float = 0.01, input_dim: int = 64):
    import tensorflow as tf

    model = tf.keras.Sequential([
        tf.keras.Input(shape=(input_dim,)),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def train(args: DigitsArgs, ctx) -> dict:
    """``main_fun`` for the cluster: returns the loss per epoch, test accuracy and checkpoint path."""
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    x_train, y_train, x_test, y_test = load_digits_split(args.test_size, args.seed)
    global_batch = args.batch_size * max(1, ctx.num_workers)
    steps = len(x_train) // global_batch
    dataset = (tf.data.Dataset.from_tensor_slices((x_train, y_train))
               .shuffle(len(x_train), seed=args.seed).repeat().batch(global_batch))
    with strategy.scope():
        model = build_model(args.learning_rate)

    class Progress(tf.keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.step = 0

        def on_train_batch_end(self, batch, logs=None):
            self.step += 1
            if logs and self.step % 5 == 0:
                ctx.report(self.step, **{k: float(v) for k, v in logs.items()})

    history = model.fit(dataset, epochs=args.epochs, steps_per_epoch=steps, callbacks=[Progress()], verbose=2)
    # Every worker writes the checkpoint (collectives may be involved); only the chief's copy is kept.
    model_dir = ctx.model_dir or tempfile.mkdtemp(prefix="digits-model-")
    target = model_dir if ctx.is_chief else tempfile.mkdtemp(prefix=f"digits-{ctx.job_name}{ctx.task_index}-")
    checkpoint = tf.train.Checkpoint(model=model)
    path = checkpoint.write(os.path.join(target, "ckpt"))
    if not ctx.is_chief:
        shutil.rmtree(target, ignore_errors=True)
    if args.export_dir:
        ctx.export(model, args.export_dir)  # every node takes part; the chief writes export_dir
    logits = model(x_test, training=False).numpy()
    accuracy = float(np.mean(np.argmax(logits, axis=1) == y_test))
    return {"loss": [float(v) for v in history.history["loss"]], "accuracy": accuracy,
            "checkpoint": path if ctx.is_chief else None, "steps_per_epoch": steps}
