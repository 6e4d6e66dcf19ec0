"""MNIST in the files TensorFlowOnSpark's examples read (the layout of its ``mnist_data_setup.py``),
so that programs written for it run here on real digits without a download:

    <out>/csv/train/part-00000-... ... lines "label,p0,...,p783", pixels 0-255
    <out>/tfr/train/part-r-00000 ...   TFRecords of tf.train.Example {label: int64, image: int64[784]}

and the same under ``test/``. Images are real MNIST from ``mnist_path`` (see ``examples.mnist``)
or, by default, scikit-learn's 8x8 digits scaled up to 28x28 (each pixel a 3x3 block, centred).
The TFRecords are written by Spark tasks through ``dfutil.saveAsTFRecords``.
"""

from __future__ import annotations

import os

from .digits import load_digits_split


def digits_as_mnist(images_8x8):
    """scikit-learn digits (``[n, 64]`` in [0, 1]) as MNIST images: ``[n, 784]`` uint8 in 0-255,
    each pixel a 3x3 block in the middle 24x24 of the 28x28 frame."""
    import numpy as np

    blocks = np.kron(np.asarray(images_8x8).reshape(-1, 8, 8), np.ones((3, 3)))
    framed = np.pad(blocks, ((0, 0), (2, 2), (2, 2)))
    return np.rint(framed * 255).astype(np.uint8).reshape(len(framed), 784)


def mnist_arrays(mnist_path: str | None = None, test_size: int = 297, seed: int = 0):
    """(x_train, y_train, x_test, y_test): ``[n, 784]`` uint8 images and int64 labels, from real
    MNIST at ``mnist_path`` or scikit-learn's digits."""
    import numpy as np

    if mnist_path:
        from .mnist import load_mnist

        x_train, y_train, x_test, y_test = load_mnist(mnist_path)
        return (np.rint(x_train * 255).astype(np.uint8), y_train, np.rint(x_test * 255).astype(np.uint8), y_test)
    x_train, y_train, x_test, y_test = load_digits_split(test_size, seed)
    return digits_as_mnist(x_train), y_train, digits_as_mnist(x_test), y_test


def write_mnist_files(spark, out_dir: str, mnist_path: str | None = None, partitions: int = 2, repeat: int = 1,
                      one_hot: bool = False, formats: tuple[str, ...] = ("csv", "tfr")) -> dict[str, str]:
    """Write the train and test sets under ``out_dir`` in TensorFlowOnSpark's layout (see the
    module's docstring); returns ``{"csv/train": path, ...}``.

    Args:
        spark: the SparkSession whose tasks write the files.
        partitions: part files per set.
        repeat: copies of the training set (``repeat=34`` turns the 1,500 digits into about
            MNIST's 60,000 rows, for programs that assume its size).
        one_hot: TFRecord labels as 10 int64 values (what ``mnist_tf_ds.py`` parses) instead of one.
        formats: ``csv`` and/or ``tfr``.
    """
    import numpy as np
    import pyarrow as pa

    from ..peers.dfutil import saveAsTFRecords
    from .digits import list_column

    x_train, y_train, x_test, y_test = mnist_arrays(mnist_path)
    # Each set crosses the driver once; Spark itself makes the ``repeat`` copies.
    sets = {"train": (x_train, y_train, repeat), "test": (x_test, y_test, 1)}
    paths = {}
    for name, (x, y, copies) in sets.items():
        if "csv" in formats:
            lines = [f"{label}," + ",".join(map(str, image)) for image, label in zip(x.tolist(), y.tolist(), strict=True)]
            paths[f"csv/{name}"] = path = os.path.join(out_dir, "csv", name)
            _copies(spark, pa.table({"value": lines}), copies).repartition(partitions).write.text(path)
        if "tfr" in formats:
            labels = list_column(np.eye(10, dtype=np.int64)[y], "int64") if one_hot else pa.array(y, pa.int64())
            df = _copies(spark, pa.table({"label": labels, "image": list_column(x, "int64")}), copies)  # no pickled rows
            paths[f"tfr/{name}"] = path = os.path.join(out_dir, "tfr", name)
            saveAsTFRecords(df.repartition(partitions), path)
    return paths


def _copies(spark, table, copies: int):
    """``table`` as a DataFrame of ``copies`` copies of its rows, made by Spark's tasks."""
    from ..runtime.driver.spark.frames import arrow_frame

    df = arrow_frame(spark, table)
    return df if copies == 1 else df.crossJoin(spark.range(copies)).select(*table.column_names)
