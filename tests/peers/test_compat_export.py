"""``compat.export_saved_model`` and ``ctx.export`` under MultiWorkerMirroredStrategy: every node
takes part, the chief's SavedModel is the one kept, and a call on the chief alone fails within
its timeout with the reason instead of hanging (a chief saving alone waits for ever otherwise)."""

from __future__ import annotations

import os
import time

import pytest

from tfos_notebook import NodeError, TFCluster

pytestmark = pytest.mark.slow


def trained_model():
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
        model.compile("sgd", "mse")
    data = tf.data.Dataset.from_tensor_slices((np.ones((32, 2), "float32"), np.ones((32, 1), "float32")))
    model.fit(data.batch(8), epochs=1, steps_per_epoch=2, verbose=0)
    return model


def export_from_chief_only(args, ctx):
    model = trained_model()
    if ctx.is_chief:
        ctx.export(model, args["export_dir"], timeout=5)
    else:
        time.sleep(60)  # alive, but not exporting: a plain model.save on the chief would wait for it


def export_everywhere(args, ctx):
    model = trained_model()
    return ctx.export(model, args["export_dir"])


def test_export_on_the_chief_alone_fails_within_its_timeout_and_names_the_fix(local_spark, tmp_path):
    cluster = TFCluster.run(local_spark.sparkContext, export_from_chief_only, {"export_dir": str(tmp_path / "m")}, 2)
    started = time.monotonic()
    with pytest.raises(NodeError, match=r"ExportError: the other workers did not join the model export within 5s "
                                        r"\((DeadlineExceededError|UnavailableError)\): under "
                                        r"MultiWorkerMirroredStrategy every worker must call"):
        cluster.shutdown()
    assert time.monotonic() - started < 60
    assert not os.path.exists(tmp_path / "m")


def test_ctx_export_writes_the_chiefs_savedmodel_at_a_path_relative_to_the_driver(local_spark, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)  # the driver's working directory, which relative paths resolve against
    cluster = TFCluster.run(local_spark.sparkContext, export_everywhere, {"export_dir": "exported"}, 2)
    assert cluster.shutdown() == str(tmp_path / "exported")
    assert cluster.run_handle.results["worker:0"] is None
    assert os.path.exists(tmp_path / "exported" / "saved_model.pb")
