"""Programs written for TensorFlowOnSpark, in the shape of its Keras MNIST examples and calling
the same API line for line (``mnist_spark.py``: InputMode.SPARK with ``TFNode.DataFeed`` and
``compat.export_saved_model``; ``mnist_tf_ds.py``: InputMode.TENSORFLOW reading TFRecord files;
``mnist_pipeline.py``: ``TFEstimator`` -> ``TFModel``; ``mnist_inference.py``: ``TFParallel`` over
TFRecords with the exported SavedModel), importing ``tfos_notebook`` where they imported
``tensorflowonspark``. Only the model is smaller, so that the tests stay cheap. Pickled by value:
executors need not import this file."""

from __future__ import annotations

import sys

from pyspark import cloudpickle

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def build_and_compile_cnn_model():
    import tensorflow as tf

    model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(8, 3, activation="relu", input_shape=(28, 28, 1)),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(32, activation="relu"),
        tf.keras.layers.Dense(10, activation="softmax"),
    ])
    model.compile(loss=tf.keras.losses.sparse_categorical_crossentropy,
                  optimizer=tf.keras.optimizers.Adam(learning_rate=0.01), metrics=["accuracy"])
    return model


def spark_main(args, ctx):
    """``main_fun`` of an InputMode.SPARK program: rows ``(image, label)`` from the feed."""
    import numpy as np
    import tensorflow as tf

    from tfos_notebook import TFNode, compat

    strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()
    tf_feed = TFNode.DataFeed(ctx.mgr, False)

    def rdd_generator():
        while not tf_feed.should_stop():
            batch = tf_feed.next_batch(1)
            if len(batch) > 0:
                example = batch[0]
                image = np.array(example[0]).astype(np.float32) / 255.0
                image = np.reshape(image, (28, 28, 1))
                label = np.array(example[1]).astype(np.float32)
                label = np.reshape(label, (1,))
                yield (image, label)
            else:
                return

    ds = tf.data.Dataset.from_generator(rdd_generator, (tf.float32, tf.float32),
                                        (tf.TensorShape([28, 28, 1]), tf.TensorShape([1])))
    ds = ds.batch(args.batch_size)
    tf.io.gfile.makedirs(args.model_dir)
    filepath = args.model_dir + "/weights-{epoch:04d}"
    callbacks = [tf.keras.callbacks.ModelCheckpoint(filepath=filepath, verbose=1, save_weights_only=True)]
    with strategy.scope():
        multi_worker_model = build_and_compile_cnn_model()
    # synchronous training: stop at 90% of the steps, so no worker runs out of fed rows first
    steps_per_epoch = args.rows / args.batch_size
    max_steps_per_worker = int(steps_per_epoch / ctx.num_workers * 0.9)
    multi_worker_model.fit(x=ds, epochs=args.epochs, steps_per_epoch=max_steps_per_worker, callbacks=callbacks)
    compat.export_saved_model(multi_worker_model, args.export_dir, ctx.job_name == "chief")
    tf_feed.terminate()


def tfrecord_main(args, ctx):
    """``main_fun`` of an InputMode.TENSORFLOW program reading TFRecord files itself."""
    import tensorflow as tf

    from tfos_notebook import compat

    strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()

    def parse_tfos(example_proto):
        feature_def = {"label": tf.io.FixedLenFeature(10, tf.int64),
                       "image": tf.io.FixedLenFeature(28 * 28 * 1, tf.int64)}
        features = tf.io.parse_single_example(example_proto, feature_def)
        image = tf.cast(features["image"], tf.float32) / 255
        image = tf.reshape(image, (28, 28, 1))
        label = tf.math.argmax(features["label"], output_type=tf.int32)
        return (image, label)

    image_pattern = ctx.absolute_path(args.images_labels)
    ds = tf.data.Dataset.list_files(image_pattern)
    ds = ds.repeat(args.epochs).shuffle(args.buffer_size)
    ds = ds.interleave(tf.data.TFRecordDataset)
    global_batch_size = args.batch_size * args.cluster_size
    train_datasets = ds.map(parse_tfos).batch(global_batch_size)
    with strategy.scope():
        multi_worker_model = build_and_compile_cnn_model()
    steps_per_epoch = args.rows // global_batch_size
    multi_worker_model.fit(x=train_datasets, epochs=args.epochs, steps_per_epoch=steps_per_epoch)
    compat.export_saved_model(multi_worker_model, args.export_dir, ctx.job_name == "chief")


def parallel_inference(args, ctx):
    """The function of a TFParallel program: each copy predicts its shard of the TFRecord files."""
    import numpy as np
    import tensorflow as tf

    saved_model = tf.saved_model.load(args.export_dir, tags="serve")
    predict = saved_model.signatures["serving_default"]

    def parse_tfr(example_proto):
        feature_def = {"label": tf.io.FixedLenFeature(1, tf.int64), "image": tf.io.FixedLenFeature(784, tf.int64)}
        features = tf.io.parse_single_example(serialized=example_proto, features=feature_def)
        image = tf.cast(features["image"], dtype=tf.float32) / 255.0
        image = tf.reshape(image, [28, 28, 1])
        label = tf.cast(features["label"], dtype=tf.float32)
        return (image, label)

    ds = tf.data.Dataset.list_files(f"{args.images_labels}/part-*", shuffle=False)
    ds = ds.shard(ctx.num_workers, ctx.worker_num)
    ds = ds.interleave(tf.data.TFRecordDataset)
    ds = ds.map(parse_tfr)
    ds = ds.batch(10)
    tf.io.gfile.makedirs(args.output)
    output_file = tf.io.gfile.GFile(f"{args.output}/part-{ctx.worker_num:05d}", mode="w")
    for batch in ds:
        predictions = predict(conv2d_input=batch[0])
        labels = np.reshape(batch[1], -1).astype(int)
        preds = np.argmax(predictions["dense_1"], axis=1)
        for x in zip(labels, preds, strict=True):
            output_file.write(f"{x[0]} {x[1]}\n")
    output_file.close()
