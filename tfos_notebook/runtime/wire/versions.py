"""What both ends read of the installed packages, without importing them: Python's and TensorFlow's
versions (a node reports its own, the driver compares them with its own) and whether tf-keras is there."""

from __future__ import annotations

import sys


def tf_keras_installed() -> bool:
    """Whether tf-keras is installed here. Nodes then run ``tf.keras`` as tf-keras
    (``TF_USE_LEGACY_KERAS=1``), as Keras 3's multi-worker ``fit`` is broken, and whatever reads
    their checkpoints must use it too."""
    import importlib.util

    return importlib.util.find_spec("tf_keras") is not None

def installed_versions() -> dict[str, str]:
    """This Python's version and the installed TensorFlow's (without importing it)."""
    from importlib import metadata

    tf = ""
    for dist in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly"):
        try:
            tf = metadata.version(dist)
            break
        except metadata.PackageNotFoundError:
            continue
    return {"python": ".".join(map(str, sys.version_info[:3])), "tensorflow": tf}
