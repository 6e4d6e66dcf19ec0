"""What both ends read of the installed packages, without importing them: Python's and TensorFlow's
versions (a node reports its own, the driver compares them with its own) and whether tf-keras is there."""

from __future__ import annotations

import os
import sys


def tf_keras_installed() -> bool:
    """Whether tf-keras is installed here. Nodes then run ``tf.keras`` as tf-keras
    (``TF_USE_LEGACY_KERAS=1``), as Keras 3's multi-worker ``fit`` is broken, and whatever reads
    their checkpoints must use it too."""
    import importlib.util

    return importlib.util.find_spec("tf_keras") is not None


#: The distributions that install the ``tensorflow`` package, in the order they are looked for.
TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly")


def installed_versions() -> dict[str, str]:
    """This Python's version and the installed TensorFlow's (without importing it). The package is
    found as an import would find it, and its distribution (tensorflow, tensorflow-cpu, ...) only
    in the folder that holds it: a search of all ``sys.path`` reads every zip and jar on it (a
    PySpark worker's holds Spark's core jar), once per name tried, which cost a node 0.1-0.35 s
    before it could register."""
    import importlib.util
    from importlib import metadata

    spec = importlib.util.find_spec("tensorflow")
    where = [os.path.dirname(p) for p in (spec.submodule_search_locations or ())] if spec else []
    found = next((d for name in TENSORFLOW_DISTRIBUTIONS for d in metadata.distributions(name=name, path=where)), None)
    return {"python": ".".join(map(str, sys.version_info[:3])), "tensorflow": found.version if found else ""}
