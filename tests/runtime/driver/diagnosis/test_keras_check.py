"""A Keras 3 object made on the driver and handed to nodes that run tf.keras as tf-keras is refused
at launch with the fix (``runtime/driver/diagnosis/kerascheck.py``), in a fresh interpreter that imports Keras 3
as a notebook on Databricks 15.4+ would (this test stack has Keras 3 beside tf-keras)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib import metadata

import pytest

pytestmark = pytest.mark.skipif(not metadata.version("keras").startswith("3"),
                                reason="Keras 2 only here (Databricks 14.3): no Keras 3 object can be made")


def _launch(legacy_keras: str, holds_model: bool, body: str = "") -> str:
    code = textwrap.dedent(f"""
        import os
        os.environ.pop("TF_USE_LEGACY_KERAS", None)
        import keras
        assert keras.__version__.startswith("3")
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])

        def main(args, ctx):
            {body}
            return {"model" if holds_model else "None"}

        from tfos_notebook import ConfigError, Run
        try:
            Run(None, main, None, 2, legacy_keras={legacy_keras})
        except ConfigError as e:
            print("ConfigError:", e)
        except TypeError as e:  # past the check: no SparkContext was given
            print("TypeError:", e)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_keras3_model_from_the_notebook_is_refused_for_tf_keras_nodes_with_the_fix():
    out = _launch("None", holds_model=True)
    assert out.startswith("ConfigError: the function or its args hold Keras 3 objects made in this notebook "
                          "(from keras.src.")  # a Keras 3 model pickles through its saving library
    assert "build the model inside the function" in out
    assert "Run(..., legacy_keras=False), %%tfos_train --keras3" in out


def test_nodes_told_to_run_keras3_take_it_and_a_function_without_keras_objects_passes():
    assert _launch("False", holds_model=True).startswith("TypeError: expected a SparkContext or a SparkSession")
    assert _launch("None", holds_model=False).startswith("TypeError: expected a SparkContext or a SparkSession")


def test_a_function_that_names_tf_keras_in_its_code_is_no_keras3_object():
    """The names its code uses (``tf.keras.layers.Dense``) are strings in the pickle, not objects."""
    out = _launch("None", holds_model=False, body="import tensorflow as tf; tf.keras.layers.Dense(1)")
    assert out.startswith("TypeError: expected a SparkContext or a SparkSession"), out
