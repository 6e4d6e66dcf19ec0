"""Driver programs for the fake-hosts tests: ``python scenarios.py NAME`` runs as a driver in its own
pid and mount namespace (see ``fakehosts.FakeHosts.driver``) against the fake hosts' master, and
prints one ``RESULT {json}`` line for the test to check. The node functions are defined here, in
``__main__``, so Spark ships them by value."""

from __future__ import annotations

import json
import os
import sys
import time

from fakehosts import VOLUME

from tfos_notebook.runtime.host.timeouts import Deadline


def session():
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("tfos-fakehosts")
    for key, value in json.loads(os.environ["TFOS_SPARK_CONF"]).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def report(**result) -> None:
    print("RESULT " + json.dumps(result), flush=True)


def write_checkpoint_and_events(args, ctx):
    import socket

    import tensorflow as tf

    step = tf.Variable(7, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(step=step)
    restored = ctx.restore(checkpoint)
    if ctx.is_chief:
        tf.train.CheckpointManager(checkpoint, ctx.model_dir, max_to_keep=1).save()
    with ctx.summary_writer().as_default():
        tf.summary.scalar("loss", 0.5, step=1)
    return {"host": socket.gethostname(), "shared": ctx.model_dir_shared, "model_dir": ctx.model_dir,
            "log_dir": ctx.log_dir, "restored": restored}


def storage() -> None:
    """A node-local model dir and a file:// log dir, then a relative model dir, then dbfs:/ paths
    through the fake hosts' /Volumes and /dbfs mounts; prints ``UNMOUNT /dbfs`` and waits for a line
    on stdin (the test unmounts /dbfs on one host), then launches with a dbfs:/ log dir again."""
    from tfos_notebook import NodeError, Run
    from tfos_notebook.errors import ConfigError
    from tfos_notebook.notebook.evaluate import evaluate_run
    from tfos_notebook.notebook.tracker import track
    from tfos_notebook.tensorboard.mirror import Mirror

    spark = session()
    out: dict = {}
    run = Run(spark, write_checkpoint_and_events, None, 2, model_dir="/tmp/model-local", log_dir="file:///tmp/tb",
              name="local-dirs")
    mirror = Mirror("/tmp/mirror")
    run.set_file_sink(mirror.receive)
    tracker = track(run)
    run.start()
    run.wait(180)
    tracker.stop()
    out["results"] = run.results
    out["findings"] = [f.describe() for f in run.diagnose() if f.code == "model_dir_not_shared"]
    out["mirrored"] = sorted(os.path.relpath(os.path.join(d, f), "/tmp/mirror")
                             for d, _, files in os.walk("/tmp/mirror") for f in files)
    try:
        evaluate_run(run.run_id, lambda checkpoint: {"loss": 0.0})
        out["evaluate"] = "accepted"
    except ConfigError as e:
        out["evaluate"] = str(e)
    os.makedirs("/tmp/shared/work", exist_ok=True)
    os.chdir("/tmp/shared/work")
    run = Run(spark, write_checkpoint_and_events, None, 2, model_dir="relative-model", name="relative")
    run.start()
    run.wait(180)
    out["relative"] = {"model_dir": run.model_dir, "results": run.results,
                       "kept": sorted(os.listdir(run.model_dir)),
                       "findings": [f.code for f in run.diagnose()]}
    run = Run(spark, write_checkpoint_and_events, None, 2, model_dir=f"dbfs:{VOLUME}/model-dbfs",
              log_dir="dbfs:/tfos/logs", name="dbfs")
    run.start()
    run.wait(180)
    out["dbfs"] = {"log_dir": run.log_dir, "results": run.results, "kept": sorted(os.listdir(f"{VOLUME}/model-dbfs")),
                   "events": sorted(os.path.relpath(d, "/dbfs/tfos/logs") for d, _, files in os.walk("/dbfs/tfos/logs")
                                    if files)}
    print("UNMOUNT /dbfs", flush=True)
    sys.stdin.readline()
    t0 = time.monotonic()
    run = Run(spark, write_checkpoint_and_events, None, 2, log_dir="dbfs:/tfos/logs", name="no-dbfs").start()
    try:
        run.wait(120)
        out["no_dbfs"] = {"error": None}
    except NodeError as e:
        out["no_dbfs"] = {"error": str(e), "seconds": time.monotonic() - t0, "state": run.state,
                          "attempt": run.attempt}
    report(**out)


def chaos() -> None:
    """A run with checkpoints in the shared dir: prints READY once mid-run, waits for the test's
    chaos (a line on stdin), then reports how the run ended."""
    from pyspark import cloudpickle

    from tfos_notebook import Run
    from tfos_notebook.runtime.driver.events import Step

    tests = os.path.join(os.path.dirname(EXAMPLES), "tests")
    sys.path[:0] = [os.path.join(tests, "runtime", "driver", "run"), tests]  # test_recovery, and its procs
    import test_recovery  # its node function: counts steps, checkpoints every 5, resumes with ctx.restore

    cloudpickle.register_pickle_by_value(test_recovery)  # Spark's pickler: executors cannot import it
    model_dir = f"{VOLUME}/model-{os.getpid()}-{time.time_ns()}"
    run = Run(session(), test_recovery.count_with_checkpoints, STEPS, 2, model_dir=model_dir, retries=2,
              name="chaos").start()
    end = time.monotonic() + 180
    while time.monotonic() < end:
        done = [e.step for e in run.events.events(Step) if e.role == "worker"]
        if done and max(done) >= 12 and os.path.exists(os.path.join(model_dir, "checkpoint")):
            break
        time.sleep(0.1)
    else:
        print(f"NOT READY: {run.state}; error: {run.error}; findings: {[f.describe() for f in run.diagnose()]}",
              flush=True)
        run.stop()
        return
    hosts = {f"{n.role}:{n.index}": n.where for n in run.nodes}
    print(f"READY {run.run_id} {json.dumps(hosts)}", flush=True)
    sys.stdin.readline()
    t0 = time.monotonic()
    error = None
    try:
        run.wait(400)
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    report(run_id=run.run_id, error=error, seconds=time.monotonic() - t0, results=run.results, attempt=run.attempt,
           findings=[{"code": f.code, "text": f.describe()} for f in run.diagnose()], hosts=hosts)


def decommission() -> None:
    """tf-keras under MultiWorkerMirroredStrategy on both hosts, backed up on the volume: prints
    READY mid-epoch, waits for the test to decommission a host's worker (a line on stdin), then
    reports how the run went on (with one worker: ``min_workers=1``)."""
    from tfos_notebook import Run
    from tfos_notebook.examples import elastic
    from tfos_notebook.runtime.driver.events import AttemptEnded, CheckpointSaved, LaunchSubmitted, Pace

    model_dir = f"{VOLUME}/decommission-{os.getpid()}-{time.time_ns()}"
    run = Run(session(), elastic.train, {"step_secs": 0.05}, 2, model_dir=model_dir, retries=0,
              min_workers=1, replacement_grace=3.0, name="decommission").start()
    ready = Deadline(240).wait_until(lambda: any(
        e.steps >= elastic.STEPS_PER_EPOCH + 5 for e in run.events.events(Pace) if e.role == "chief"), interval=0.05)
    if not ready:
        print(f"NOT READY: {run.state}; error: {run.error}", flush=True)
        run.stop()
        return
    hosts = {f"{n.role}:{n.index}": n.where for n in run.nodes}
    print(f"READY {run.run_id} {json.dumps(hosts)}", flush=True)
    sys.stdin.readline()
    error = result = None
    try:
        result = run.wait(400)
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    report(run_id=run.run_id, error=error, result=result, hosts=hosts,
           saved=[[e.step, e.seconds] for e in run.events.events(CheckpointSaved)],
           ended=[[e.cause, e.workers, e.step] for e in run.events.events(AttemptEnded)],
           launches=[e.num_tasks for e in run.events.events(LaunchSubmitted)],
           findings=[{"code": f.code, "text": f.describe()} for f in run.diagnose()])


def run_notebook(name: str, **env: str) -> list:
    """Execute example notebook ``name`` in a fresh kernel (on this driver's host); returns its cells."""
    import nbformat
    from nbclient import NotebookClient

    os.environ.update(env)
    nb = nbformat.read(os.path.join(EXAMPLES, name), as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": EXAMPLES}}).execute()
    return nb.cells


def notebooks() -> None:
    """Example notebooks 01 and 05 against the fake hosts (each kernel its own application) with
    their work dir on the fake volume, then 02 evaluating, from a second kernel, the checkpoints of
    a run this driver trains across the hosts with its model and log dirs on the volume."""
    sys.path.insert(0, os.path.join(os.path.dirname(EXAMPLES), "tests", "examples"))
    from test_notebook_02_evaluation import TRAINING_CELL

    from tfos_notebook.notebook import TrainOptions, train

    work = f"{VOLUME}/examples"
    env = {"TFOS_WORK_DIR": work, "TFOS_EPOCHS": "3", "TFOS_MONITOR": "text"}
    out: dict = {}
    for name in ("01_train_digits.ipynb", "05_migrate_tfos.ipynb"):
        t0 = time.monotonic()
        run_notebook(name, **env)
        with open(os.path.join(work, name.replace(".ipynb", ".json"))) as f:
            out[name[:2]] = {"summary": json.load(f), "seconds": time.monotonic() - t0}
    t0 = time.monotonic()
    options = TrainOptions(workers=2, epochs=3, model_dir=f"{VOLUME}/model-02", logdir=f"{VOLUME}/logs",
                           name="digits_for_02", monitor="none")
    run = train(TRAINING_CELL, options, {}, spark=session())
    cells = run_notebook("02_concurrent_evaluation.ipynb", TFOS_EVAL_RUN="digits_for_02", TFOS_EVAL_EVERY="0.5")
    run.wait(120)
    text = ["".join(o.get("text", "") for o in c.get("outputs", []) if o.get("output_type") == "stream")
            for c in cells]
    out["02"] = {"text": "\n".join(text), "seconds": time.monotonic() - t0,
                 "nodes": sorted(n.where for n in run.run.nodes), "log_dir": run.run.log_dir,
                 "events": sorted(os.listdir(run.run.log_dir))}
    report(**out)


def train_keras_slowly(args, ctx):
    import time

    import tensorflow as tf

    model = tf.keras.Sequential([tf.keras.layers.Input((8,)), tf.keras.layers.Dense(32), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    data = tf.data.Dataset.from_tensors((tf.ones((16, 8)), tf.ones((16, 1)))).repeat()
    sleep = tf.keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: time.sleep(0.05))
    model.fit(data, epochs=args["epochs"], steps_per_epoch=20, verbose=0, callbacks=[*ctx.callbacks(
        tensorboard=False, checkpoint=False, backup=False, progress=False), sleep])
    return "trained"


def profile() -> None:
    """A run that trains on both hosts, profiled for 2 s mid-run: where each host's trace lands in
    the driver's mirror, and how long it took."""
    from tfos_notebook import Run
    from tfos_notebook.runtime.driver.events import Pace
    from tfos_notebook.tensorboard.mirror import Mirror

    run = Run(session(), train_keras_slowly, {"epochs": 30}, 2, name="profiled")
    mirror = Mirror("/tmp/mirror-profile")
    run.set_file_sink(mirror.receive)
    run.start()
    end = time.monotonic() + 180
    while not [p for p in run.events.events(Pace) if p.epoch >= 1] and time.monotonic() < end:
        time.sleep(0.2)
    t0 = time.monotonic()
    result = run.profile(seconds=2)
    took = time.monotonic() - t0
    folder = os.path.join(mirror.root, "plugins", "profile", result.session)
    traces = {name: os.path.getsize(os.path.join(folder, name))
              for name in (sorted(os.listdir(folder)) if os.path.isdir(folder) else [])}
    run.stop()
    report(traces=traces, seconds=took, failures=result.failures, hosts=sorted(n.where for n in run.nodes))


def train_and_save_with_keras3(args, ctx):
    """Keras 3 (the run asks for it), with every callback ``ctx.callbacks()`` gives writing to the
    run's directories, and an export."""
    import keras
    import tensorflow as tf

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    data = tf.data.Dataset.from_tensors((tf.ones((16, 8)), tf.ones((16, 1)))).repeat()
    model.fit(data, epochs=2, steps_per_epoch=5, verbose=0, callbacks=ctx.callbacks())
    ctx.export(model, f"{ctx.model_dir}/export")
    return keras.__version__


def keras3_volume() -> None:
    """A two-node run on Keras 3 whose model dir (checkpoints, backup, export) and log dir are on the
    volume: Keras 3 saves its weights as .h5 files, which HDF5 writes out of order."""
    from tfos_notebook import Run

    where = f"{VOLUME}/keras3-{os.getpid()}"
    run = Run(session(), train_and_save_with_keras3, None, 2, model_dir=f"{where}/model", log_dir=f"{where}/logs",
              legacy_keras=False, name="keras3-volume").start()
    error = None
    try:
        run.wait(300)
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    report(error=error, results=run.results,
           files=sorted(os.path.relpath(os.path.join(d, f), where) for d, _, fs in os.walk(where) for f in fs))


STEPS = 60  # of the chaos run: about 10 s of work after the chaos (0.15 s a step)
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "example_notebooks")

if __name__ == "__main__":
    {"storage": storage, "chaos": chaos, "notebooks": notebooks, "profile": profile,
     "keras3_volume": keras3_volume, "decommission": decommission}[sys.argv[1]]()
