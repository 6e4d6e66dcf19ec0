"""Read real MNIST from local files: the four standard idx files (optionally gzipped) in a
directory, or Keras's ``mnist.npz``. Nothing is downloaded."""

from __future__ import annotations

import gzip
import os

from ..errors import ConfigError

IDX_FILES = {"x_train": "train-images-idx3-ubyte", "y_train": "train-labels-idx1-ubyte",
             "x_test": "t10k-images-idx3-ubyte", "y_test": "t10k-labels-idx1-ubyte"}


def read_idx(path: str):
    """The array in one idx file (``.gz`` or not): uint8 images ``[n, rows, cols]`` or labels ``[n]``."""
    import numpy as np

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[:2] != b"\0\0" or data[2] != 0x08:
        raise ConfigError(f"{path} is not an idx file of unsigned bytes (bad magic number {data[:4]!r})")
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def _find(directory: str, stem: str) -> str:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    raise ConfigError(f"MNIST file {stem}[.gz] is missing in {directory}: the directory needs "
                      f"{', '.join(IDX_FILES.values())} (each may be gzipped), or give the path of mnist.npz")


def load_mnist(path: str):
    """(x_train, y_train, x_test, y_test): images flattened to 784 float32 values in [0, 1],
    int64 labels, from a directory of idx files or an ``.npz`` with those four keys.

    Raises:
        ConfigError: the path does not exist, or lacks a file or key.
    """
    import numpy as np

    if not os.path.exists(path):
        raise ConfigError(f"MNIST_PATH {path!r} does not exist: give a directory with the four MNIST idx files "
                          "or the path of mnist.npz")
    if os.path.isdir(path):
        arrays = {key: read_idx(_find(path, stem)) for key, stem in IDX_FILES.items()}
    else:
        with np.load(path) as npz:
            missing = [k for k in IDX_FILES if k not in npz]
            if missing:
                raise ConfigError(f"{path} lacks the arrays {missing}; it needs x_train, y_train, x_test, y_test")
            arrays = {k: npz[k] for k in IDX_FILES}

    def images(x):
        return (x.reshape(len(x), -1) / 255.0).astype("float32")

    return (images(arrays["x_train"]), arrays["y_train"].astype("int64"),
            images(arrays["x_test"]), arrays["y_test"].astype("int64"))
