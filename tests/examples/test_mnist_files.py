"""Real MNIST from local files (idx, gzipped or not, or mnist.npz), for the examples' MNIST_PATH."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from tfos_notebook import ConfigError
from tfos_notebook.examples.digits import load_images
from tfos_notebook.examples.mnist import IDX_FILES, load_mnist


def write_idx(path, array: np.ndarray, gz: bool) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    data = header + array.astype(np.uint8).tobytes()
    if gz:
        with gzip.open(f"{path}.gz", "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)


def fake_mnist(n_train: int = 6, n_test: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"x_train": rng.integers(0, 256, (n_train, 28, 28)), "y_train": rng.integers(0, 10, n_train),
            "x_test": rng.integers(0, 256, (n_test, 28, 28)), "y_test": rng.integers(0, 10, n_test)}


@pytest.mark.parametrize("gz", [False, True])
def test_a_directory_of_idx_files_gives_flat_images_in_0_1_and_labels(tmp_path, gz):
    arrays = fake_mnist()
    for key, stem in IDX_FILES.items():
        write_idx(tmp_path / stem, arrays[key], gz)
    x_train, y_train, x_test, y_test = load_images(str(tmp_path))
    assert x_train.shape == (6, 784) and x_test.shape == (4, 784) and x_train.dtype == np.float32
    np.testing.assert_allclose(x_train[2], arrays["x_train"][2].ravel() / 255.0, rtol=1e-6)
    assert y_test.tolist() == arrays["y_test"].tolist() and y_train.dtype == np.int64


def test_mnist_npz_is_read_like_the_idx_files(tmp_path):
    arrays = fake_mnist()
    np.savez(tmp_path / "mnist.npz", **{k: v.astype(np.uint8) for k, v in arrays.items()})
    x_train, y_train, _, _ = load_mnist(str(tmp_path / "mnist.npz"))
    assert x_train.shape == (6, 784) and y_train.tolist() == arrays["y_train"].tolist()


def test_missing_files_are_named_with_what_the_directory_needs(tmp_path):
    with pytest.raises(ConfigError, match="MNIST file train-images-idx3-ubyte\\[.gz\\] is missing"):
        load_mnist(str(tmp_path))
    with pytest.raises(ConfigError, match="does not exist: give a directory with the four MNIST idx files"):
        load_mnist(str(tmp_path / "nowhere"))
