"""A 2-worker MultiWorkerMirroredStrategy model trained from a DataFrame (scikit-learn's digits)."""

from __future__ import annotations

import numpy as np
import pytest

from tfos_notebook import Run

from . import nodes

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

EPOCHS = 12
ACCURACY = 0.9


def test_two_workers_train_digits_from_a_dataframe_to_ninety_percent(feed_standalone):
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(y))
    train, test = order[:1497], order[1497:]
    df = feed_standalone.createDataFrame(
        [(x[i].tolist(), int(y[i])) for i in train], "pixels array<float>, label long").repartition(5)
    run = Run(feed_standalone.sparkContext, nodes.mwms_digits,
              {"batch": 32, "epochs": EPOCHS, "x_test": x[test], "y_test": y[test]}, 2, master_node=None,
              input_mode="spark", preflight_wait=5).start()
    run.wait_for_reservations(120)
    summary = run.train(df.cache(), num_epochs=EPOCHS)
    assert summary.epochs == EPOCHS and summary.rows == EPOCHS * 1497
    out = run.wait(600)
    assert run.results["worker:1"]["accuracy"] == pytest.approx(out["accuracy"])  # one model, in step
    assert out["loss"][-1] < out["loss"][0]
    print(f"\n2-worker MWMS on digits: held-out accuracy {out['accuracy']:.3f} after {EPOCHS} epochs "
          f"(loss {out['loss'][0]:.3f} -> {out['loss'][-1]:.3f})")
    assert out["accuracy"] >= ACCURACY, out
