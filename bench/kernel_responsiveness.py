"""P6: does the notebook stay responsive while a run trains?

Starts a real Jupyter kernel (jupyter_client), launches a 2-worker Keras training run with
``%%tfos_train`` on local Spark, and times the round trip of a trivial cell (request sent ->
reply and idle received, as a frontend sees it) while the nodes train. The anchor is the same
trivial cell on the same kernel, idle, just before the launch.

    python bench/kernel_responsiveness.py [--samples 40] [--monitor widget|text] [--steps 600]

Prints a table: median / p90 / max in ms, and the ratio to the anchor.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from jupyter_client import KernelManager

REPO = Path(__file__).resolve().parent.parent

SETUP = """
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.ui.enabled", "false").getOrCreate())
%load_ext tfos_notebook

def load_digits_arrays():
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    return (x / 16.0).astype("float32"), y.astype("int32")
"""

TRAIN = """%%tfos_train --workers 2 --epochs {epochs} --name bench_run --monitor {monitor}
import tensorflow as tf
x, y = load_digits_arrays()
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Input((64,)), tf.keras.layers.Dense(256, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(64).with_options(options)

class Report(tf.keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        ctx.report(int(self.model.optimizer.iterations.numpy()), loss=float(logs["loss"]))

model.fit(ds, epochs=args.epochs, steps_per_epoch=100, callbacks=[Report()], verbose=0)
"""


class Kernel:
    """A Jupyter kernel and a blocking client."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(env=env, cwd=str(REPO))
        self.client = self.km.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)

    def run(self, code: str, timeout: float = 300) -> tuple[float, str]:
        """Execute ``code``; returns (seconds until reply and idle, text it printed or returned)."""
        out: list[str] = []

        def hook(msg: dict) -> None:
            content = msg["content"]
            if msg["msg_type"] == "stream":
                out.append(content["text"])
            elif msg["msg_type"] in ("execute_result", "display_data"):
                out.append(content["data"].get("text/plain", ""))
            elif msg["msg_type"] == "error":
                out.append("\n".join(content["traceback"]))

        t = time.perf_counter()
        reply = self.client.execute_interactive(code, timeout=timeout, output_hook=hook)
        took = time.perf_counter() - t
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"cell failed: {''.join(out)}")
        return took, "".join(out)

    def close(self) -> None:
        self.client.stop_channels()
        self.km.shutdown_kernel(now=True)


def trivial_timings(kernel: Kernel, n: int, pause: float) -> list[float]:
    timings = []
    for _ in range(n):
        timings.append(kernel.run("1 + 1")[0])
        time.sleep(pause)
    return timings


def while_running(kernel: Kernel, samples: int, pause: float) -> tuple[list[float], int]:
    """Trivial-cell timings taken between two checks that both saw the run training."""
    kept, checks = [], 0
    previous = None
    while len(kept) < samples:
        _, state = kernel.run("print(bench_run.state)")
        checks += 1
        running = state.split()[0] == "running"
        if previous is not None and running:
            kept += previous
        if state.split()[0] in ("finished", "failed", "stopped"):
            break
        previous = trivial_timings(kernel, 5, pause) if running else None
    return kept, checks


def summary(timings: list[float]) -> tuple[float, float, float]:
    ms = sorted(t * 1000 for t in timings)
    return statistics.median(ms), ms[int(0.9 * (len(ms) - 1))], ms[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=40, help="trivial cells timed while training")
    parser.add_argument("--monitor", choices=("widget", "text"), default="widget")
    parser.add_argument("--epochs", type=int, default=8, help="epochs of 100 steps (long enough to sample)")
    parser.add_argument("--pause", type=float, default=0.1, help="seconds between two trivial cells")
    a = parser.parse_args()

    kernel = Kernel()
    try:
        kernel.run(SETUP)
        idle = trivial_timings(kernel, a.samples, a.pause)
        launch, _ = kernel.run(TRAIN.format(epochs=a.epochs, monitor=a.monitor))
        busy, checks = while_running(kernel, a.samples, a.pause)
        _, final = kernel.run("print(bench_run.wait(), bench_run.state)")
    finally:
        kernel.close()
    if not busy:
        raise SystemExit("the run ended before any cell could be timed: raise --epochs")
    rows = [("idle kernel (anchor)", summary(idle), len(idle)),
            (f"while 2 workers train ({a.monitor} monitor)", summary(busy), len(busy))]
    print(f"\nP6 kernel responsiveness: round trip of a trivial cell (1 + 1), ms; {os.cpu_count()} cores")
    print(f"{'':<40} {'median':>8} {'p90':>8} {'max':>8} {'n':>4}")
    for label, (med, p90, top), n in rows:
        print(f"{label:<40} {med:8.1f} {p90:8.1f} {top:8.1f} {n:4d}")
    print(f"ratio (training / idle, medians): {rows[1][1][0] / rows[0][1][0]:.2f}")
    print(f"the %%tfos_train cell itself (first launch in this kernel) returned in {launch * 1000:.0f} ms; "
          f"run ended: {final.split()[-1]}")


if __name__ == "__main__":
    main()
