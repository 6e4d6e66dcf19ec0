"""TensorFlowOnSpark's ``compat`` module, by its name: helpers for the function each node runs.

    from tfos_notebook import compat
    compat.export_saved_model(model, args.export_dir, ctx.job_name == "chief")   # on every node

TensorFlow is imported when a helper is called, not with this module.
"""

from __future__ import annotations

from typing import Any

from .runtime.node.child.export import EXPORT_TIMEOUT_SECS
from .runtime.node.child.export import export_saved_model as _export

__all__ = ["disable_auto_shard", "export_saved_model", "is_gpu_available"]


def export_saved_model(model: Any, export_dir: str, is_chief: bool = False, *,
                       timeout: float = EXPORT_TIMEOUT_SECS) -> str | None:
    """Save a trained Keras model as a SavedModel; call it on every node.

    The chief writes ``export_dir``. Under MultiWorkerMirroredStrategy a save is collective, so the
    other workers take part, writing a temporary directory that is removed at once
    (TensorFlowOnSpark left a ``worker_model`` directory behind on each); first they all wait for
    each other at most ``timeout`` seconds, so a call on the chief alone fails with
    ``ExportError`` instead of hanging. A relative ``export_dir`` is resolved against the driver's
    working directory, as ``ctx.absolute_path`` does. Returns the directory written on the chief,
    None elsewhere.
    """
    return _export(model, export_dir, is_chief, timeout)


def disable_auto_shard(options: Any) -> None:
    """Turn off tf.data's auto-sharding in ``options`` (a ``tf.data.Options``): data Spark feeds
    is already split between the nodes."""
    import tensorflow as tf

    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF


def is_gpu_available() -> bool:
    """Whether TensorFlow sees a GPU in this process (``CUDA_VISIBLE_DEVICES`` holds the GPUs
    Spark assigned the node)."""
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))
