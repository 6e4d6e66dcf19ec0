"""Functions the feeding tests run on the nodes (pickled by value, so executors need not import them)."""

from __future__ import annotations

import sys
import time

from pyspark import cloudpickle

from tfos_notebook import TFNode

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def dataset_ids_per_epoch(args, ctx):
    """Reads ``args['epochs']`` epochs through ctx.dataset; checks each row's payload against its
    id and returns the ids seen in each epoch."""
    ds = ctx.dataset(args.get("batch", 64), features=["id", "x", "s"])
    epochs = []
    for _ in range(args["epochs"]):
        ids = []
        for batch in ds:
            i, x, s = batch["id"].numpy(), batch["x"].numpy(), batch["s"].numpy()
            assert x.shape[1:] == (2,), x.shape
            assert (x[:, 0] == i * 0.5).all() and (x[:, 1] == i + 1).all()
            assert [v.decode() for v in s] == [f"row-{v}" for v in i]
            ids += i.tolist()
        epochs.append(ids)
    return epochs


def dataset_spec(args, ctx):
    """The shapes ctx.dataset declares for ``id`` and ``x``, and the rows of its one epoch."""
    ds = ctx.dataset(16, features=["id", "x"])
    spec = {name: s.shape.as_list() for name, s in ds.element_spec.items()}
    return {"spec": spec, "rows": sum(int(batch["id"].shape[0]) for batch in ds)}


def datafeed_ids(args, ctx):
    """TFoS style: reads rows with DataFeed until the feed ends; returns the first field of each
    (``whole``: each row)."""
    feed = TFNode.DataFeed(ctx.mgr)
    ids = []
    while not feed.should_stop():
        ids += [row if args.get("whole") else row[0] for row in feed.next_batch(args.get("batch", 100))]
    return ids


def wide_rows(args, ctx):
    """Reads the 1 MB binary / string / 8x8 image rows through ctx.dataset and describes them."""
    seen = []
    for batch in ctx.dataset(4):
        shapes = {k: tuple(v.shape) for k, v in batch.items()}
        dtypes = {k: v.dtype.name for k, v in batch.items()}
        for i, blob, name, image in zip(batch["id"].numpy(), batch["blob"].numpy(), batch["name"].numpy(),
                                        batch["image"].numpy(), strict=True):
            seen.append((int(i), len(blob), blob[:1], name.decode(), float(image.sum()), image.shape))
    return {"rows": seen, "shapes": shapes, "dtypes": dtypes}


def terminate_after(args, ctx):
    """Reads ``args['batches']`` batches, then terminates the feed."""
    feed = TFNode.DataFeed(ctx.mgr)
    rows = sum(len(feed.next_batch(100)) for _ in range(args["batches"]))
    feed.terminate()
    return {"rows": rows, "should_stop": feed.should_stop()}


def read_then_wait(args, ctx):
    """Reads a batch through DataFeed, says so, and waits (to be killed)."""
    import time

    from tfos_notebook import TFNode

    TFNode.DataFeed(ctx.mgr).next_batch(10)
    print("read", flush=True)
    time.sleep(600)


def never_reads(args, ctx):
    time.sleep(args.get("sleep", 120))


def fail_while_fed(args, ctx):
    feed = TFNode.DataFeed(ctx.mgr)
    feed.next_batch(100)
    feed.next_batch(100)
    raise ValueError("boom on purpose, while being fed")


def predict_sum(args, ctx):
    """Answers inference with x[0] + x[1] for each row."""
    return ctx.predict(lambda x: x[:, 0] + x[:, 1], batch_size=args.get("batch", 50), features="x")


def tfos_inference(args, ctx):
    """TFoS style inference: one result string per row, through batch_results."""
    feed = TFNode.DataFeed(ctx.mgr, train_mode=False)
    answered = 0
    while not feed.should_stop():
        batch = feed.next_batch(args.get("batch", 30))
        if batch:
            feed.batch_results([f"{value * 2}" for value in batch])
            answered += len(batch)
    return answered


def mwms_digits(args, ctx):
    """Trains a small classifier with MultiWorkerMirroredStrategy and Keras fit on the fed digits;
    returns the held-out accuracy and the loss per epoch."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Input((64,)), tf.keras.layers.Dense(64, activation="relu"),
                                     tf.keras.layers.Dense(10)])
        model.compile(optimizer=tf.keras.optimizers.Adam(0.01),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    history = model.fit(ctx.dataset(args["batch"], features="pixels", label="label"), epochs=args["epochs"],
                        verbose=0)
    _, accuracy = model.evaluate(args["x_test"], args["y_test"], batch_size=100, verbose=0)
    return {"accuracy": float(accuracy), "loss": [float(v) for v in history.history["loss"]]}


def epoch_checksums(args, ctx):
    """Reads ``args['epochs']`` epochs of ``id`` through ctx.dataset and returns, per epoch, the
    row count, the sum of ids and the sum of their squares; also the GPUs this node was given.
    With ``kill_worker_once``, worker 0 of the first attempt kills its own process after the first
    epoch, as a lost executor would."""
    import os
    import signal

    sums = []
    for epoch in range(args["epochs"]):
        ids = [int(i) for batch in ctx.dataset(args.get("batch", 64), features="id") for i in batch.numpy()]
        sums.append([len(ids), sum(ids), sum(i * i for i in ids)])
        if args.get("kill_worker_once") and ctx.attempt == 0 and ctx.job_name == "worker" and epoch == 0:
            os.kill(os.getpid(), signal.SIGKILL)
    return {"sums": sums, "gpus": list(ctx.gpus), "visible": os.environ.get("CUDA_VISIBLE_DEVICES", "")}


def predict_unless_worker(args, ctx):
    """The chief answers inference; the worker fails as a node whose host lacks the model does."""
    import time

    if ctx.job_name == "worker":
        time.sleep(args["fail_after"])
        raise FileNotFoundError(f"no saved model at {args['model']} on this host")
    return ctx.predict(lambda x: x[:, 0] + x[:, 1], batch_size=50, features="x")
