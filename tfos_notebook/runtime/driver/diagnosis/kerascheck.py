"""A Keras 3 object made in the notebook and sent to nodes that run ``tf.keras`` as tf-keras.

From Databricks Runtime 15.4 on, ``keras`` is Keras 3 beside tf-keras, and a notebook that builds a
model with ``keras`` (or ``tf.keras`` without ``TF_USE_LEGACY_KERAS=1``) holds a Keras 3 object. The
nodes run tf-keras wherever it is installed (Keras 3's multi-worker ``fit`` is broken upstream,
keras-team/keras#20585), so a Keras 3 model, layer or optimizer handed to them through the function's
closure or its args meets Keras 2 code there: it fails deep in a node, as a pickle or attribute error,
or trains on the wrong Keras. The launch refuses it at once instead, naming the object and the fix.

Only when Keras 3 is loaded here does this look: it pickles the function and its args as Spark will
and notes the module of every object the pickler meets (an object's class, a class or function
pickled by reference, a module), without running anything. The names a function's code uses
(``tf.keras.layers``) are only strings: they name no object and are not read.
"""

from __future__ import annotations

import io
import sys
import types
from typing import Any

from ....errors import ConfigError


def keras3_loaded() -> bool:
    """Whether this process has imported Keras 3 (the ``keras`` package, major version 3 or more)."""
    keras = sys.modules.get("keras")
    version = getattr(keras, "__version__", "") or ""
    return version[:1].isdigit() and int(version.split(".")[0]) >= 3


def keras3_modules(*objs: Any) -> list[str]:
    """The Keras 3 modules whose objects ``objs`` hold, as Spark's cloudpickle pickles them (none
    when Keras 3 is not loaded, or the objects do not pickle: Spark then says why itself)."""
    if not keras3_loaded():
        return []
    from pyspark import cloudpickle

    found: list[str] = []

    class Finder(cloudpickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            named = obj.__name__ if isinstance(obj, types.ModuleType) else \
                getattr(obj, "__module__", None) if isinstance(obj, (type, types.FunctionType)) else None
            for module in (type(obj).__module__, named):
                if isinstance(module, str) and (module == "keras" or module.startswith("keras.")) \
                        and module in sys.modules and module not in found:
                    found.append(module)
            return super().reducer_override(obj)

    try:
        Finder(io.BytesIO(), protocol=cloudpickle.DEFAULT_PROTOCOL).dump(objs)
    except Exception:  # Spark's own pickling of the task says what does not pickle
        return []
    return found


def refuse_keras3_for_tf_keras(main_fun: Any, args: Any, nodes_legacy: bool) -> None:
    """Refuse a launch whose function or args hold Keras 3 objects when the nodes run tf-keras.

    Raises:
        ConfigError: naming the Keras 3 modules found and the two ways out.
    """
    if not nodes_legacy:
        return
    modules = keras3_modules(main_fun, args)
    if modules:
        raise ConfigError(
            f"the function or its args hold Keras 3 objects made in this notebook (from {', '.join(modules[:3])}), "
            "but the nodes run tf.keras as tf-keras (Keras 2: TF_USE_LEGACY_KERAS=1, since Keras 3's multi-worker "
            "fit is broken), where they would not load or would train on the wrong Keras: build the model inside "
            "the function (with MultiWorkerMirroredStrategy it must be built in strategy.scope() there anyway), "
            "or run Keras 3 on the nodes (Run(..., legacy_keras=False), %%tfos_train --keras3)")
