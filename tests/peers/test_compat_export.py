"""``ctx.export`` (and so ``compat.export_saved_model``) under MultiWorkerMirroredStrategy called on
the chief alone fails within its timeout with the reason, instead of hanging: a chief saving alone
waits for ever otherwise. (The export every node calls is in ``test_tfos_programs.py``.)"""

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


def test_export_on_the_chief_alone_fails_within_its_timeout_and_names_the_fix(local_spark, tmp_path):
    cluster = TFCluster.run(local_spark.sparkContext, export_from_chief_only, {"export_dir": str(tmp_path / "m")}, 2)
    started = time.monotonic()
    with pytest.raises(NodeError, match=r"ExportError: the other workers did not join the model export within 5s "
                                        r"\((DeadlineExceededError|UnavailableError)\): under "
                                        r"MultiWorkerMirroredStrategy every worker must call") as failed:
        cluster.shutdown()
    assert time.monotonic() - started < 60
    # The failure names both ways a worker misses the export: not calling it, or never leaving fit.
    assert [f.code for f in failed.value.findings] == ["export_peer_missing"]
    assert "likely cause: chief:0 on " in str(failed.value) and "Dataset.from_generator" in str(failed.value)
    assert not os.path.exists(tmp_path / "m")
