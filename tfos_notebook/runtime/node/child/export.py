"""Saving a trained Keras model as a SavedModel from a node (``ctx.export``,
``tfos_notebook.compat.export_saved_model``), correctly under MultiWorkerMirroredStrategy.

Under that strategy a save is a collective step: every worker must take part, or the chief waits
for the others for ever (seen with tf-keras 2.21: a chief saving alone while its peer is alive
never returns). So every node calls the export: the chief writes ``export_dir``, each other worker
a temporary directory that is removed as soon as its part is done. Before saving, the workers
meet in one all-reduce bounded by ``timeout``: an export called on the chief alone (``if
ctx.is_chief:``) fails within that time with :class:`ExportError` instead of hanging. Without a
multi-worker strategy only the chief writes; the other nodes return at once.

Runs in the nodes' processes; TensorFlow is imported when a model is saved.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import Any

from ....errors import TFOSError
from ...host.paths import absolute_path, local_path
from ...wire.errors import EXPORT_PEERS_MISSING

EXPORT_TIMEOUT_SECS = 60.0  # how long the workers wait for each other before a save
DEFAULT_FS_ENV, WORKING_DIR_ENV = "TFOS_DEFAULT_FS", "TFOS_WORKING_DIR"  # set in each node's process


class ExportError(TFOSError):
    """A model export from the nodes cannot complete (a worker did not take part in time)."""


def resolve_export_dir(export_dir: str) -> str:
    """``export_dir`` as the node writes it: a relative path is resolved as ``ctx.absolute_path``
    does (against the driver's working directory on a local filesystem, the user's home on HDFS),
    since the node's own working directory is temporary; ``file://`` URIs become plain paths."""
    default_fs, working_dir = os.environ.get(DEFAULT_FS_ENV), os.environ.get(WORKING_DIR_ENV)
    path = absolute_path(default_fs, working_dir, export_dir) if default_fs and working_dir else export_dir
    return local_path(path) or path


def collective_workers(strategy: Any) -> int:
    """How many workers (chief included) share ``strategy``'s collectives: the cluster size under
    MultiWorkerMirroredStrategy, else 1."""
    import tensorflow as tf

    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 1
    spec = resolver.cluster_spec().as_dict()
    return sum(len(spec.get(job, [])) for job in ("chief", "master", "worker"))


def meet(strategy: Any, timeout: float) -> None:
    """Wait (at most ``timeout`` seconds) until every worker of ``strategy`` arrives here.

    Raises:
        ExportError: a worker did not arrive in time (it did not call the export, or it is gone).
    """
    import tensorflow as tf

    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout)

    def count():
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, tf.constant(1.0),
                                                              options=options)

    try:
        strategy.run(count)
    except (tf.errors.DeadlineExceededError, tf.errors.UnavailableError, tf.errors.CancelledError) as e:
        raise ExportError(
            f"{EXPORT_PEERS_MISSING} within {timeout:g}s "
            f"({type(e).__name__}): under MultiWorkerMirroredStrategy every worker must call "
            "compat.export_saved_model(model, export_dir, is_chief) or ctx.export(model, export_dir), not only "
            "the chief (the chief writes export_dir, the others a temporary copy that is removed)") from e


def keras_of(model: Any) -> str:
    """What ``model`` is: ``keras2`` (a tf-keras model, or one of the Keras 2 that TensorFlow before
    2.16 ships), ``keras3`` or ``tf`` (another ``tf.Module``)."""
    roots = {cls.__module__.split(".")[0] for cls in type(model).__mro__}
    if "tf_keras" in roots:
        return "keras2"
    if "keras" in roots:
        return "keras2" if str(getattr(sys.modules.get("keras"), "__version__", "3")).startswith("2.") else "keras3"
    return "tf"


def save_model(model: Any, path: str) -> None:
    """Write ``model`` as a SavedModel at ``path``: ``model.save(path, save_format="tf")`` for Keras 2
    (which loads back as the Keras model), ``model.export(path)`` for Keras 3 (an inference
    SavedModel); a model that is not Keras goes through ``tf.saved_model.save``."""
    keras = keras_of(model)
    if keras == "keras2":
        model.save(path, save_format="tf")
    elif keras == "keras3":
        model.export(path)
    else:
        import tensorflow as tf

        tf.saved_model.save(model, path)


def export_saved_model(model: Any, export_dir: str, is_chief: bool, timeout: float = EXPORT_TIMEOUT_SECS) -> str | None:
    """Save ``model`` from this node; every node calls it (see the module's docstring).

    Args:
        model: a Keras model (tf-keras or Keras 3) or any ``tf.Module``.
        export_dir: where the chief writes the SavedModel (local path, ``file://``, ``hdfs://``...;
            a relative path is resolved against the driver's working directory).
        is_chief: whether this node is the chief (``ctx.job_name == "chief"``).
        timeout: seconds the workers wait for each other before saving.

    Returns:
        The directory written on the chief, None on the other nodes.

    Raises:
        ExportError: under MultiWorkerMirroredStrategy, a worker did not join within ``timeout``.
    """
    import tensorflow as tf

    strategy = getattr(model, "distribute_strategy", None) or tf.distribute.get_strategy()
    shared = collective_workers(strategy) > 1
    if shared:
        meet(strategy, timeout)
    if is_chief:
        path = resolve_export_dir(export_dir)
        save_model(model, path)
        return path
    if shared:  # this worker's part of the collective save, into a directory removed at once
        scratch = tempfile.mkdtemp(prefix="tfos-export-")
        try:
            save_model(model, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return None
