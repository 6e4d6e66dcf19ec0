"""Which functions get TensorFlow imported into their node's process while the cluster forms
(``runtime/driver/run/preimport.py``): read from the code, never by running it."""

from __future__ import annotations

import functools
import types

import numpy as np

from tfos_notebook.cellfn import CellFunction
from tfos_notebook.peers.distributor import StrategyScopeNode, TrainFnNode
from tfos_notebook.runtime.driver.run.preimport import preimports

tf = types.ModuleType("tensorflow")  # stands for a notebook's `import tensorflow as tf` (not imported here)


def imports_it(args, ctx):
    import tensorflow as tf

    return tf.constant(1)


def imports_keras_from_it(args, ctx):
    from tensorflow import keras

    return keras


def uses_the_global(args, ctx):
    return tf.constant(1)


def calls_a_helper(args, ctx):
    return imports_it(args, ctx)


def numpy_only(args, ctx):
    return np.ones(3).sum() + len(str(ctx))


def recursive(args, ctx, n=3):
    return recursive(args, ctx, n - 1) if n else np.zeros(1)


def closing_over(fn):
    def main_fun(args, ctx):
        return fn(args, ctx)

    return main_fun


def nested_definition(args, ctx):
    def build():
        import tf_keras

        return tf_keras

    return build()


def test_a_function_that_reaches_tensorflow_has_it_imported_first():
    for fn in (imports_it, imports_keras_from_it, uses_the_global, calls_a_helper, nested_definition,
               closing_over(imports_it), functools.partial(calls_a_helper, {}),
               StrategyScopeNode(numpy_only)):  # the runner's strategy is TensorFlow's
        assert preimports(fn) == ("tensorflow",), fn


def test_a_function_that_never_names_tensorflow_imports_nothing_more():
    for fn in (numpy_only, recursive, closing_over(numpy_only), functools.partial(numpy_only, {}), print, len,
               TrainFnNode(numpy_only)):  # a runner's custom strategy: only what train_fn does
        assert preimports(fn) == (), fn


def test_a_cell_is_read_from_its_body_and_the_names_it_captured():
    assert preimports(CellFunction("import tensorflow as tf\nreturn tf.constant(1)", "<cell>")) == ("tensorflow",)
    assert preimports(CellFunction("return model_fn(args)", "<cell>", {"model_fn": imports_it})) == ("tensorflow",)
    assert preimports(CellFunction("return np.ones(2)", "<cell>", {"np": np})) == ()


def test_a_fed_nodes_feed_server_is_a_module_its_import_thread_can_import_first():
    """A fed node's child imports its feed server (pyarrow, numpy) on its import thread before
    TensorFlow, so that its main thread never imports numpy while TensorFlow's import does."""
    import importlib.util

    from tfos_notebook.runtime.wire.plan import FEED_SERVER_MODULE

    assert importlib.util.find_spec(FEED_SERVER_MODULE) is not None
