"""P8: what the step timing costs the training it measures.

One real node on local Spark trains tf-keras on the digits data; inside that one run it alternates
``model.fit`` passes of ``--steps`` steps with the step timing on (``ctx.callbacks()``'s
``StepTimer``, whose sums go to the driver once a second) and off (no callback), ``--rounds`` of
each after a warm-up pass, and times every pass with its own clock. The anchor is the same run's
passes without timing. Prints the median step time of each, their ratio, the median of the
rounds' own on/off ratios (each round's passes ran back to back), and how many ``Pace`` reports
the driver received.

On a noisy machine those ratios scatter by more than the cost they measure, so it also prints the
cost itself, counted in the node: whether Keras calls any callback at each step with the timing on
(tf-keras's own flag), and the CPU time the timing's reporting thread (``tfos-pace``) used over
the whole run, as a share of the run's time: all the work the timing adds to the node's process
beside the training.

    python bench/step_timing.py [--rounds 15] [--steps 300] [--batch 64] [--width 256]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def alternate(args, ctx):
    """The node: a warm-up pass, then ``rounds`` pairs of passes, timing on and off in turn (which
    goes first alternates too). Returns the seconds per step of each pass."""
    import time

    import tensorflow as tf

    from tfos_notebook.examples.digits import load_digits_split

    x, y, _, _ = load_digits_split()
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(args["batch"]).prefetch(2)
    model = tf.keras.Sequential([tf.keras.layers.Input((64,)), tf.keras.layers.Dense(args["width"], activation="relu"),
                                 tf.keras.layers.Dense(args["width"], activation="relu"), tf.keras.layers.Dense(10)])
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    timer = ctx.callbacks(tensorboard=False, checkpoint=False, progress=False, backup=False,
                          batch_size=args["batch"])
    assert [type(c).__name__ for c in timer] == ["StepTimer"]

    def one_pass(callbacks) -> float:
        began = time.perf_counter()
        model.fit(data, epochs=1, steps_per_epoch=args["steps"], verbose=0, callbacks=callbacks)
        return (time.perf_counter() - began) / args["steps"]

    one_pass(timer)  # warm-up: tracing, the first steps (the reporting thread starts here)
    one_pass([])
    began, pace_began = time.perf_counter(), pace_cpu()
    on, off = [], []
    for i in range(args["rounds"]):
        order = ((on, timer), (off, [])) if i % 2 == 0 else ((off, []), (on, timer))
        for into, callbacks in order:
            into.append(one_pass(callbacks))
    hooks = tf.keras.callbacks.CallbackList(timer, model=model)
    return {"on": on, "off": off, "pace_cpu": pace_cpu() - pace_began, "secs": time.perf_counter() - began,
            "batch_hooks": getattr(hooks, "_should_call_train_batch_hooks", None)}


def pace_cpu() -> float:
    """CPU seconds (user + system) the node's ``tfos-pace`` thread has used, from /proc."""
    import threading

    thread = next(t for t in threading.enumerate() if t.name == "tfos-pace")
    with open(f"/proc/self/task/{thread.native_id}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=256)
    a = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from tfos_notebook import Run
    from tfos_notebook.runtime.driver.events import Pace

    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    print(f"uptime: {os.getloadavg()}")
    run = Run(spark, alternate, vars(a), 1, env={"TF_CPP_MIN_LOG_LEVEL": "2"}).start()
    result = run.wait(1800)
    on, off = statistics.median(result["on"]), statistics.median(result["off"])
    paces = len(run.events.events(Pace))
    print(f"uptime: {os.getloadavg()}")
    print(f"\nP8 step timing: {a.rounds} passes of {a.steps} steps each way, batch {a.batch}, "
          f"2 x Dense({a.width}), one node on local[1]")
    print(f"{'':<28}{'median ms/step':>16}{'min':>10}{'max':>10}")
    for label, values in (("timing off (anchor)", result["off"]), ("timing on", result["on"])):
        print(f"{label:<28}{statistics.median(values) * 1e3:>16.3f}{min(values) * 1e3:>10.3f}"
              f"{max(values) * 1e3:>10.3f}")
    print(f"ratio on/off: {on / off:.4f} ({(on / off - 1) * 100:+.2f}%); Pace reports received: {paces}")
    # Each round's two passes ran back to back, so their ratio cancels what slowed the machine for
    # longer than a pass (another process, the host): the median of those ratios is the figure to
    # trust on a noisy machine, with its quartiles as the spread.
    paired = sorted(a_on / a_off for a_on, a_off in zip(result["on"], result["off"], strict=True))
    q1, mid, q3 = statistics.quantiles(paired, n=4)
    print(f"paired ratio on/off, median of {len(paired)} rounds: {mid:.4f} ({(mid - 1) * 100:+.2f}%), "
          f"quartiles {q1:.4f} - {q3:.4f}")
    hooks = {True: "yes", False: "no"}.get(result["batch_hooks"], "unknown (not tf-keras)")
    print(f"Keras calls a callback at each step with the timing on: {hooks}; the timing's reporting "
          f"thread used {result['pace_cpu'] * 1e3:.0f} ms of CPU in {result['secs']:.1f} s of passes "
          f"({result['pace_cpu'] / result['secs'] * 100:.3f}% of one core)")
    time.sleep(0.1)


if __name__ == "__main__":
    main()
