"""Renders docs/monitor.png: the monitor of a finished 2-node run, in JupyterLab, in headless Chromium.

Starts a Spark standalone cluster (2 workers with fake GPU addresses) and a real ``jupyter lab`` on
localhost, writes a notebook that trains a small Keras model on the digits data with
``%%tfos_train --workers 2 --gpus 1``, and has ``monitor.cjs`` (playwright-core driving Debian's
chromium) run it and photograph the training cell once the run has finished.

    apt-get install -y chromium
    npm install --prefix /tmp/pw playwright-core
    NODE_PATH=/tmp/pw/node_modules python docs/screenshot/make_monitor_png.py [--out docs/monitor.png]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

from tfos_notebook.devcluster import StandaloneCluster, free_port  # noqa: E402

SETUP = """from pyspark.sql import SparkSession
builder = SparkSession.builder.appName("digits")
for key, value in {conf}.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
%load_ext tfos_notebook

def load_digits_arrays():
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    return (x / 16.0).astype("float32"), y.astype("int32")"""

TRAIN = """%%tfos_train --workers 2 --gpus 1 --epochs 4 --name digits
import tensorflow as tf
x, y = load_digits_arrays()
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Input((64,)), tf.keras.layers.Dense(64, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), metrics=["accuracy"],
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048).repeat().batch(64)

class Progress(tf.keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        ctx.report(int(self.model.optimizer.iterations.numpy()), loss=logs["loss"])
    def on_epoch_end(self, epoch, logs=None):
        print(f"epoch {epoch}: loss {logs['loss']:.3f} accuracy {logs['accuracy']:.3f}")

hist = model.fit(ds, epochs=args.epochs, steps_per_epoch=25, callbacks=[Progress()], verbose=0)
return {"accuracy": hist.history["accuracy"][-1]}"""


def _wait_http(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer in {timeout:.0f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(REPO / "docs" / "monitor.png"))
    out = Path(parser.parse_args().out).resolve()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the executors inherit it from the cluster's workers
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    cluster = StandaloneCluster(workers=2, cores=1, gpus_per_worker=2).start()
    lab = None
    try:
        root = Path(tempfile.mkdtemp(prefix="tfos-lab-"))
        nb = nbformat.v4.new_notebook()
        # The console progress bar would print the barrier stage under the monitor.
        conf = json.dumps({**cluster.spark_conf(gpus_per_task=1), "spark.ui.showConsoleProgress": "false"}, indent=4)
        nb.cells = [nbformat.v4.new_code_cell(SETUP.format(conf=conf)), nbformat.v4.new_code_cell(TRAIN)]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, root / "digits.ipynb")
        port, token = free_port(), secrets.token_hex(16)
        lab = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
             "--LabApp.expose_app_in_browser=True", *(["--allow-root"] if os.geteuid() == 0 else [])],
            env=env, stdout=open(root / "lab.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        _wait_http(f"http://127.0.0.1:{port}/api/status?token={token}", 60)
        url = f"http://127.0.0.1:{port}/lab/tree/digits.ipynb?reset&token={token}"
        subprocess.run(["node", str(HERE / "monitor.cjs"), url, str(out)], env=env, check=True, timeout=900)
    finally:
        if lab is not None:
            lab.terminate()
            lab.wait(timeout=30)
        cluster.stop()


if __name__ == "__main__":
    main()
