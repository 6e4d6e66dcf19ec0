"""The package on a Databricks Runtime LTS ML stack, as a user of that runtime gets it.

Run inside a stand-in of the runtime (``stacks/build.py``: the runtime's Python and packages, its
pyspark invisible to pip) by ``make test-stacks``, which sets ``TFOS_STACK`` to the stack's name and
``TFOS_UV`` to the uv that resolves the package against it; the main suite leaves this folder out
(tests/conftest.py). What each test proves is one column of the table in docs/databricks.md
(``stacks/table.py`` fills it from these tests' results):

- install: the package resolves and installs with its notebook and MLflow features within the
  runtime's versions, changing none of its packages and bringing no pyspark or py4j;
- demo: example notebook 01 trains a classifier on two nodes from a Spark DataFrame (MultiWorker-
  MirroredStrategy through the runtime's Keras) and evaluates it, in a kernel of the runtime's Python;
- MLflow: that run is one MLflow run with its params, metric history, status and model, through the
  runtime's MLflow (mlflow-skinny 2.x or 3.x) on a ``file:`` store;
- TensorBoard: the runtime's TensorBoard serves the nodes' curves;
- evaluation: example notebook 02 (``%%tfos_evaluate``) evaluates each of the run's checkpoints;
- TFoS program: a TensorFlowOnSpark InputMode.SPARK program (its ``mnist_spark.py``'s shape) runs
  and exports on ``local-cluster[2,1,1024]``, the cluster TensorFlowOnSpark's own tests use;
- Keras: the nodes run the Keras the rule says (tf-keras where installed, else the runtime's Keras 2),
  and say so.
"""

from __future__ import annotations

import glob
import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "stacks"))
sys.path.insert(0, str(ROOT / "tests"))
import build  # noqa: E402  (stacks/build.py: the stack file's reader)

STACK = os.environ.get("TFOS_STACK", "")
pytestmark = pytest.mark.skipif(not STACK, reason="run by make test-stacks inside a stack's environment")
EPOCHS = 4


def stack_file() -> Path:
    return build.stack_file(STACK)


def installed() -> dict[str, str]:
    return {build.normalise(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()}


# -- install -------------------------------------------------------------------------------------
def test_install_changed_nothing_the_runtime_ships():
    report = json.loads((Path(sys.prefix) / "install.json").read_text())
    assert report["stack"] == STACK
    assert report["changed_runtime"] == {} and report["hidden_visible"] == []
    pins, have = build.pins(stack_file()), installed()
    substituted = set(report["substitutes"])
    assert {k: (v, pins[k]) for k, v in have.items() if k in pins and v != pins[k] and k not in substituted} == {}
    assert not {"pyspark", "py4j"} & have.keys()  # pip does not see them, as on Databricks
    import pyspark

    assert pyspark.__version__ == build.header(stack_file(), "spark")
    assert have["tfos-notebook"] and have["jupyter-server-proxy"]  # the notebook feature's one addition


def test_install_resolves_the_package_within_the_runtimes_versions(tmp_path):
    """What pip would install for ``tfos_notebook[notebook,mlflow]`` on the runtime, resolved with
    the runtime's versions as constraints on its Python: it resolves, and takes nothing of the
    runtime's at another version, and no pyspark or py4j."""
    out = tmp_path / "resolved.txt"
    subprocess.run([os.environ["TFOS_UV"], "pip", "compile", "-q", "--python-version",
                    build.header(stack_file(), "python"), "-c", str(stack_file()), "--extra", "notebook",
                    "--extra", "mlflow", str(ROOT / "pyproject.toml"), "-o", str(out)], check=True, timeout=300)
    resolved, pins = build.pins(out), build.pins(stack_file())
    assert not {"pyspark", "py4j"} & resolved.keys()
    assert {k for k, v in resolved.items() if k in pins and pins[k] != v} == set()


# -- the example notebooks ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """Example notebook 01, as ``make demo`` runs it (headless, a kernel of this Python), for
    ``EPOCHS`` epochs, logged to MLflow on a ``file:`` store; its runs registry in a folder of its own."""
    work = tmp_path_factory.mktemp("demo")
    env = {**os.environ, "TFOS_WORK_DIR": str(work), "TFOS_EPOCHS": str(EPOCHS), "TFOS_MLFLOW": "on",
           "MLFLOW_TRACKING_URI": f"file://{work}/mlruns", "TFOS_NOTEBOOK_STATE_DIR": str(work / "state"),
           "PYSPARK_PYTHON": sys.executable, "TFOS_MONITOR": "text"}
    done = subprocess.run([sys.executable, str(ROOT / "example_notebooks" / "run_demo.py")], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    summary = json.loads((work / "01_train_digits.json").read_text())
    return SimpleNamespace(work=work, env=env, out=done.stdout, summary=summary)


@pytest.mark.slow
def test_demo_notebook_01_trains_and_evaluates(demo):
    s = demo.summary
    assert s["accuracy"] > 0.85, s
    assert len(s["loss_per_epoch"]) == EPOCHS and s["loss_per_epoch"][-1] < s["loss_per_epoch"][0] / 2, s
    assert os.path.exists(os.path.join(s["exported_model"], "saved_model.pb"))
    assert "held-out accuracy (scikit-learn digits)" in demo.out  # make demo's report


@pytest.mark.slow
def test_keras_the_nodes_run_is_the_rules_and_is_said(demo):
    """The nodes' registrations say which Keras they run, which the run's MLflow run keeps as a tag
    (the monitor's lines say it too, where they reach the notebook: a headless client like nbclient
    drops what a cell prints once it has ended, which ipykernel 6.29 sends there)."""
    from mlflow import MlflowClient

    from tfos_notebook.runtime.host.versions import keras_in_use, tf_keras_installed

    expected = keras_in_use(tf_keras_installed())  # tf-keras where installed (15.4+), else Keras 2 (14.3)
    assert expected.startswith("tf-keras " if "tf-keras" in build.pins(stack_file()) else "keras 2.")
    client = MlflowClient(demo.env["MLFLOW_TRACKING_URI"])
    [run] = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert run.data.tags["tfos.keras"] == expected
    said = [line for line in demo.out.splitlines() if "cluster ready:" in line]
    assert all(line.endswith(f"(tf.keras: {expected})") for line in said), said


@pytest.mark.slow
def test_mlflow_logs_one_run_with_params_metrics_status_and_model(demo):
    from mlflow import MlflowClient

    client = MlflowClient(demo.env["MLFLOW_TRACKING_URI"])
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert len(runs) == 1, [r.info.run_name for r in runs]
    run = runs[0]
    assert run.info.status == "FINISHED" and run.data.params["workers"] == "2"
    assert len(client.get_metric_history(run.info.run_id, "loss")) >= EPOCHS
    # the run's model (MLflow 2: its artifacts under model; MLflow 3: a logged model of the run)
    # loads and predicts, through this MLflow, with the nodes' Keras
    code = textwrap.dedent(f"""
        import mlflow.tensorflow, numpy as np
        from tfos_notebook.examples.digits import load_digits_split
        _, _, x, y = load_digits_split()
        model = mlflow.tensorflow.load_model("runs:/{run.info.run_id}/model")
        print(float(np.mean(np.argmax(model.predict(x, verbose=0), axis=1) == y)))
    """)
    env = {**demo.env, **({"TF_USE_LEGACY_KERAS": "1"} if "tf-keras" in installed() else {})}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert float(done.stdout.split()[-1]) > 0.85


@pytest.mark.slow
def test_tensorboard_shows_the_nodes_curves(demo):
    from tbhelpers import wait_for_scalars  # tests/tensorboard/tbhelpers.py

    from tfos_notebook.tensorboard import process

    started = process.start(str(Path(demo.summary["tensorboard_logdir"]) / os.listdir(
        demo.summary["tensorboard_logdir"])[0]), reuse=False)
    try:
        # each node's own run, written by Keras's TensorBoard callback (ctx.callbacks())
        points = wait_for_scalars(started.info.port, "chief_0/train", "epoch_loss", EPOCHS, timeout=120)
    finally:
        process.stop(started.info)
    assert len(points) >= EPOCHS


@pytest.mark.slow
def test_evaluation_notebook_02_evaluates_each_checkpoint(demo, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(ROOT / "example_notebooks" / "02_concurrent_evaluation.ipynb"), as_version=4)
    for key, value in {"TFOS_EVAL_RUN": "digits", "TFOS_EVAL_EVERY": "0.5",
                       "TFOS_NOTEBOOK_STATE_DIR": demo.env["TFOS_NOTEBOOK_STATE_DIR"]}.items():
        monkeypatch.setenv(key, value)  # the kernel's environment: 01's run, in 01's registry
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(demo.work)}}).execute()
    last = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.output_type == "stream")
    assert f"epoch   {EPOCHS}  accuracy" in last, last


# -- a TensorFlowOnSpark program ---------------------------------------------------------------------
@pytest.mark.slow
def test_tfos_program_runs_and_exports_on_local_cluster(spark_slot, tmp_path):
    from peers import tfos_programs  # tests/peers: mnist_spark.py's main function, pickled by value

    from tfos_notebook import TFCluster
    from tfos_notebook.examples.mnist_files import write_mnist_files

    spark = spark_slot.get("local-cluster", {"spark.master": "local-cluster[2,1,1024]",
                                             "spark.driver.host": "127.0.0.1", "spark.ui.enabled": "false"})
    sc = spark.sparkContext
    files = write_mnist_files(spark, str(tmp_path / "data"), formats=("csv",))
    args = SimpleNamespace(batch_size=32, cluster_size=2, epochs=1, rows=1500, model_dir=str(tmp_path / "model"),
                           export_dir=str(tmp_path / "export"))

    def parse(ln):
        vec = [int(x) for x in ln.split(",")]
        return (vec[1:], vec[0])

    images_labels = sc.textFile(files["csv/train"]).map(parse)
    cluster = TFCluster.run(sc, tfos_programs.spark_main, args, args.cluster_size, num_ps=0, tensorboard=False,
                            input_mode=TFCluster.InputMode.SPARK, master_node="chief")
    cluster.train(images_labels, args.epochs)
    cluster.shutdown()
    assert os.path.exists(os.path.join(args.export_dir, "saved_model.pb"))
    assert glob.glob(os.path.join(args.model_dir, "weights-0001*"))
    assert sc.parallelize(range(4), 2).count() == 4
