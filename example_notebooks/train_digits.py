"""The demo: train a Keras classifier on scikit-learn's digits with 2 nodes on local Spark.

    make demo        (or: .venv/bin/python example_notebooks/train_digits.py [--epochs N])

Starts a local[2] SparkSession (the embedded default), launches a chief and a worker with
MultiWorkerMirroredStrategy through tfos_notebook, streams their progress here, and prints the
accuracy on held-out digits and where the checkpoint is.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--model-dir", default=os.path.join(tempfile.gettempdir(), "tfos-demo-model"))
    opts = parser.parse_args()

    from pyspark.sql import SparkSession

    from tfos_notebook import Run
    from tfos_notebook.examples.digits import DigitsArgs, train
    from tfos_notebook.runtime.events import ClusterReady, Registered, RunFinished, Step

    spark = (SparkSession.builder.master("local[2]").appName("tfos-demo")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    started = time.time()

    def show(event) -> None:
        if isinstance(event, Registered):
            print(f"  registered {event.role}:{event.index} on {event.host}:{event.port}", flush=True)
        elif isinstance(event, ClusterReady):
            print(f"  cluster ready: {event.cluster_spec}", flush=True)
        elif isinstance(event, Step) and event.role == "chief" and event.step % 20 == 0:
            print(f"  chief step {event.step}: loss {event.metrics.get('loss', float('nan')):.4f}", flush=True)
        elif isinstance(event, RunFinished):
            print(f"  run {event.state} after {time.time() - started:.1f}s", flush=True)

    run = Run(spark.sparkContext, train, DigitsArgs(epochs=opts.epochs), 2, model_dir=opts.model_dir,
              name="digits-demo")
    run.events.subscribe(show)
    print(f"training on scikit-learn digits with 2 nodes (chief + worker) on local Spark, run {run.run_id}")
    result = run.start().wait()
    print(f"\naccuracy on {DigitsArgs().test_size} held-out digits: {result['accuracy']:.3f}")
    print(f"loss per epoch: {[round(v, 4) for v in result['loss']]}")
    print(f"checkpoint: {result['checkpoint']}")
    spark.stop()


if __name__ == "__main__":
    main()
