"""What logging a run to MLflow costs the training: step time with MLflow on beside off.

One process, one local[2] SparkSession, 2-worker Keras runs (MultiWorkerMirroredStrategy on the
digits data) that report every step with ``ctx.report``, alternating MLflow off and on
(``Run(..., mlflow=False|True)``, a ``sqlite:`` store in a temporary directory, or ``--store http``:
an ``mlflow server`` process started here). With MLflow on, the driver logs every reported step of
the chief, both nodes' system samples, and an ``mlflow.log_metric`` call the chief makes every 50
steps (relayed from the node), so the whole path is exercised: node sampler and relay, control
channel, driver tracker, tracking store. On local[2] the driver, the store and both nodes share
the machine's cores: the tracker's work competes with training here, as it would not on a cluster.

Each node times its steps (the wall time between two ``on_train_batch_end``); a run's figure is
the median step time of its chief after ``--warmup`` steps. Prints every run, then the median of
the runs of each mode and the ratio on / off.

    python bench/mlflow_overhead.py [--pairs 3] [--steps 400] [--width 512] [--store sqlite|http]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # mlflowserver.py, the test harness's MLflow server

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def train(args, ctx):
    """The nodes' function: ``args["steps"]`` Keras steps, each reported; returns the step times (s)."""
    import os
    import time

    import numpy as np
    import tensorflow as tf
    from sklearn.datasets import load_digits

    relayed = os.environ.get("MLFLOW_TRACKING_URI", "").startswith("tfos-relay")
    if relayed:
        import mlflow
    x, y = load_digits(return_X_y=True)
    x, y = (x / 16.0).astype("float32"), y.astype("int32")
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Input((64,)),
                                     tf.keras.layers.Dense(args["width"], activation="relu"),
                                     tf.keras.layers.Dense(args["width"], activation="relu"),
                                     tf.keras.layers.Dense(10)])
        model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(128).with_options(options)
    ends: list[float] = []

    class Timed(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            ends.append(time.perf_counter())
            step = int(self.model.optimizer.iterations.numpy())
            ctx.report(step, loss=float(logs["loss"]))
            if relayed and ctx.is_chief and step % 50 == 0:  # a cell's own MLflow call now and then
                mlflow.log_metric("node_loss", float(logs["loss"]), step=step)

    model.fit(ds, epochs=1, steps_per_epoch=args["steps"], callbacks=[Timed()], verbose=0)
    return list(np.diff(ends))


def one_run(spark, mlflow_on: bool, args: dict, warmup: int) -> dict:
    from tfos_notebook import Run

    started = time.perf_counter()
    run = Run(spark, train, args, 2, mlflow=mlflow_on, name=f"mlflow-{'on' if mlflow_on else 'off'}").start()
    steps = run.wait(600)[warmup:]
    tracked = run.tracking
    return {"mode": "on" if mlflow_on else "off", "median_ms": 1000 * statistics.median(steps),
            "p90_ms": 1000 * statistics.quantiles(steps, n=10)[-1], "steps": len(steps),
            "wall_s": time.perf_counter() - started,
            "logged": "" if tracked is None else f"{tracked.mlflow_run_id} {tracked.error or ''}".strip()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3, help="runs of each mode, alternating (default 3)")
    parser.add_argument("--steps", type=int, default=400, help="training steps per run (default 400)")
    parser.add_argument("--warmup", type=int, default=50, help="first steps left out of each run (default 50)")
    parser.add_argument("--width", type=int, default=512, help="units of the model's two hidden layers")
    parser.add_argument("--store", choices=("sqlite", "http"), default="sqlite", help="the tracking store")
    a = parser.parse_args()
    from pyspark.sql import SparkSession

    root = tempfile.mkdtemp(prefix="tfos-mlflow-bench-")
    server = None
    if a.store == "http":
        from mlflowserver import PASSWORD, USERNAME, MlflowServer

        server = MlflowServer(os.path.join(root, "server")).start()
        os.environ.update(MLFLOW_TRACKING_URI=server.url, MLFLOW_TRACKING_USERNAME=USERNAME,
                          MLFLOW_TRACKING_PASSWORD=PASSWORD)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{root}/mlflow.db"
    spark = (SparkSession.builder.master("local[2]").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.ui.enabled", "false").getOrCreate())
    args = {"steps": a.steps, "width": a.width}
    try:
        one_run(spark, True, {**args, "steps": 60}, 10)  # warms Spark's workers, TensorFlow and the store
        rows = [one_run(spark, mode, args, a.warmup) for _ in range(a.pairs) for mode in (False, True)]
    finally:
        if server is not None:
            server.stop()
    print(f"{'run':>3} {'MLflow':>6} {'median step ms':>15} {'p90 ms':>8} {'steps':>6} {'wall s':>7}  MLflow run")
    for i, r in enumerate(rows, 1):
        print(f"{i:>3} {r['mode']:>6} {r['median_ms']:>15.2f} {r['p90_ms']:>8.2f} {r['steps']:>6} {r['wall_s']:>7.1f}  "
              f"{r['logged']}")
    off = statistics.median(r["median_ms"] for r in rows if r["mode"] == "off")
    on = statistics.median(r["median_ms"] for r in rows if r["mode"] == "on")
    print(f"\nmedian step (store {a.store}): MLflow off {off:.2f} ms, on {on:.2f} ms, on/off {on / off:.3f}")


if __name__ == "__main__":
    main()
