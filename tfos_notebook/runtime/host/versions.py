"""What both ends read of the installed packages, without importing them: Python's, TensorFlow's and
Keras's versions (a node reports its own, the driver compares them with its own), whether tf-keras is
there, and the oldest releases this package supports (``FLOORS``)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping

from ...errors import UnsupportedVersion

#: The oldest release of each that this package supports: those of the oldest Databricks Runtime
#: LTS for Machine Learning it is tested on (14.3: Python 3.10, Spark 3.5.0, TensorFlow 2.14.1).
#: Spark 3.5 is where barrier ``mapInArrow`` (the gang on Spark Connect) and Connect's job tags begin.
FLOORS = {"python": (3, 10), "pyspark": (3, 5), "tensorflow": (2, 14)}


def release(version: str) -> tuple[int, int]:
    """The (major, minor) of a version string (``"2.16.1"``, ``"3.5.0.dev0"``, ``"4.0.0+db"``)."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def too_old(name: str, version: str) -> str:
    """Why ``version`` of ``name`` (a key of ``FLOORS``) cannot run this package, or ""."""
    floor = FLOORS[name]
    if release(version) >= floor:
        return ""
    need = ".".join(map(str, floor))
    return f"{name} {version} is older than {need}, the oldest tfos_notebook supports"


def require_pyspark() -> str:
    """pyspark's version, once it is known to be importable and new enough.

    Raises:
        UnsupportedVersion: pyspark is missing, or older than ``FLOORS["pyspark"]``.
    """
    try:
        import pyspark
    except ImportError as e:
        raise UnsupportedVersion(
            f"tfos_notebook needs pyspark, which this Python cannot import ({e}): where Spark runs the "
            "notebook (a Spark cluster, a Databricks runtime) use that Python, whose Spark provides it; "
            "elsewhere install it with the package: pip install 'tfos_notebook[spark]'") from e
    why = too_old("pyspark", pyspark.__version__)
    if why:
        raise UnsupportedVersion(f"{why}: use Spark 3.5 or newer (on Databricks, Runtime 14.3 LTS or later)")
    return pyspark.__version__


def tensorflow_too_old(version: str) -> str:
    """Why TensorFlow ``version`` (as a node reports it) cannot run a node, with the fix; or ""."""
    why = too_old("tensorflow", version) if version else ""
    return f"{why}: install tensorflow>=2.14 (and tf-keras of the same release) on the executors" if why else ""


def tf_keras_installed() -> bool:
    """Whether tf-keras is installed here. Nodes then run ``tf.keras`` as tf-keras
    (``TF_USE_LEGACY_KERAS=1``), as Keras 3's multi-worker ``fit`` is broken, and whatever reads
    their checkpoints must use it too."""
    import importlib.util

    return importlib.util.find_spec("tf_keras") is not None


#: The distributions that install the ``tensorflow`` package, in the order they are looked for.
TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly")


LEGACY_KERAS_ENV = "TF_USE_LEGACY_KERAS"
LEGACY_KERAS_ON = ("1", "true", "True")  # the values by which TensorFlow takes it as set


def uses_legacy_keras(setting: bool | None, run_env: Mapping[str, str], inherited: Mapping[str, str]) -> bool:
    """Whether a node's process runs ``tf.keras`` as tf-keras, in this order: as the run's own
    environment (``Run(env=...)``, ``run_env``) sets ``TF_USE_LEGACY_KERAS``; as the run's
    ``legacy_keras`` ``setting`` says; as the environment the node inherits (the executor's) sets it;
    else wherever tf-keras is installed (Keras 3's multi-worker ``fit`` is broken upstream)."""
    if LEGACY_KERAS_ENV in run_env:
        return run_env[LEGACY_KERAS_ENV] in LEGACY_KERAS_ON
    if setting is not None:
        return setting
    if LEGACY_KERAS_ENV in inherited:
        return inherited[LEGACY_KERAS_ENV] in LEGACY_KERAS_ON
    return tf_keras_installed()


def is_keras2(tf_keras_name: str) -> bool:
    """Whether ``tf.keras``, of module name ``tf_keras_name`` (``tf.keras.__name__``), is Keras 2:
    tf-keras (``tf_keras...``), or the Keras that TensorFlow before 2.16 ships (``keras.api._v2...``,
    Databricks 14.3's), rather than Keras 3 (``keras._tf_keras...``). The two save, load and name
    their checkpoints differently."""
    return tf_keras_name.startswith(("tf_keras", "keras.api._v2"))


def keras_in_use(legacy: bool) -> str:
    """Which Keras ``tf.keras`` is in a process whose ``TF_USE_LEGACY_KERAS`` is ``legacy``:
    ``tf-keras 2.16.0`` (Keras 2, from its own package), ``keras 3.5.0``, or ``keras 2.14.0`` (what
    TensorFlow before 2.16 ships as tf.keras); "" when neither is installed."""
    from importlib import metadata

    for name in (("tf-keras", "keras") if legacy else ("keras",)):
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return ""


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
