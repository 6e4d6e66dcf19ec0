"""``python -m tfos_notebook.tracking.savemodel EXPORT OUT``: the Keras model a run exported
(``ctx.export``, a SavedModel) saved as an MLflow model, the ``tensorflow`` flavor, in the new directory OUT.

Run by the driver in a process of its own (``model.py``), with the Keras the nodes saved it with
(``TF_USE_LEGACY_KERAS``): TensorFlow never loads into the notebook's kernel for it, and nothing
here talks to a tracking server (the kernel uploads OUT).
"""

from __future__ import annotations

import importlib.util
import sys
from importlib import metadata
from typing import Any


def signature_of(model: Any) -> Any:
    """The model's signature from its input and output tensors (batch dimension free), so that
    ``mlflow.pyfunc.spark_udf`` can serve it; None when a shape is not known."""
    import numpy as np
    from mlflow.models import ModelSignature
    from mlflow.types.schema import Schema, TensorSpec

    def schema(tensors: list, names: list[str]) -> Schema | None:
        specs = []
        for tensor, name in zip(tensors, names, strict=True):
            shape = tuple(tensor.shape)
            if any(d is None for d in shape[1:]):
                return None
            specs.append(TensorSpec(np.dtype(tensor.dtype.name if hasattr(tensor.dtype, "name") else tensor.dtype),
                                    (-1, *shape[1:]), name if len(tensors) > 1 else None))
        return Schema(specs)

    try:
        inputs = schema(list(model.inputs), list(model.input_names))
        outputs = schema(list(model.outputs), list(model.output_names))
    except (AttributeError, TypeError, ValueError):  # a subclassed model without known tensors
        return None
    return ModelSignature(inputs, outputs) if inputs is not None else None


def requirements(legacy_keras: bool) -> list[str]:
    """MLflow's TensorFlow requirement, and tf-keras's when the model is a tf-keras one (MLflow's
    own inference of them loads the model once more in yet another process: seconds more)."""
    import mlflow.tensorflow

    reqs = list(mlflow.tensorflow.get_default_pip_requirements())
    if legacy_keras and importlib.util.find_spec("tf_keras") is not None:
        reqs.append(f"tf-keras=={metadata.version('tf-keras')}")
    return reqs


def main(argv: list[str]) -> int:
    export, out = argv[1], argv[2]
    import mlflow.tensorflow
    import tensorflow as tf

    from ..runtime.host.versions import is_keras2

    legacy = is_keras2(tf.keras.__name__)
    if legacy:  # a Keras 2 SavedModel (tf-keras, or TensorFlow's own before 2.16) loads back as the Keras model
        model = tf.keras.models.load_model(export)
        signature = signature_of(model)
    else:  # Keras 3's export (or a tf.Module's) is an inference SavedModel: logged as a TensorFlow module
        model, signature = tf.saved_model.load(export), None
    mlflow.tensorflow.save_model(model, out, signature=signature, pip_requirements=requirements(legacy))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
