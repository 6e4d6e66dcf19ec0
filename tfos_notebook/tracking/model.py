"""The model a run exported (``ctx.export``), logged as an MLflow model of the run.

Saving it in MLflow's format takes TensorFlow, which the notebook's kernel need not load: a
process of its own does it (``savemodel.py``), with the Keras the nodes saved it with. The kernel
then logs the directory as ``mlflow.tensorflow.log_model`` of the installed MLflow would, so that
``mlflow.tensorflow.load_model("runs:/<run id>/model")`` loads it:

- MLflow 3: through its logged-model API, a logged model named ``model`` whose source is the run
  (``models:/<model id>`` loads it too);
- MLflow 2 (mlflow-skinny 2.9-2.21 on Databricks' LTS ML runtimes, which have no logged-model API):
  as the run's artifacts under ``model``, recorded in the run's model history as MLflow 2's own
  ``log_model`` records it, so that its UI lists it as the run's model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from ..errors import TFOSError

MODEL_NAME = "model"
SAVE_TIMEOUT_SECS = 600.0


class ModelLoggingError(TFOSError):
    """The exported model could not be saved in MLflow's format."""


def save_mlflow_model(export_path: str, out: str, legacy_keras: bool, timeout: float = SAVE_TIMEOUT_SECS) -> None:
    """Save the model at ``export_path`` as an MLflow model (``tensorflow`` flavor) in ``out``.

    Raises:
        ModelLoggingError: TensorFlow could not load it here, or MLflow could not save it (the
            message ends with the process's last lines).
    """
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if legacy_keras:
        env["TF_USE_LEGACY_KERAS"] = "1"
    else:
        env.pop("TF_USE_LEGACY_KERAS", None)
    try:
        done = subprocess.run([sys.executable, "-m", "tfos_notebook.tracking.savemodel", export_path, out], env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ModelLoggingError(f"saving {export_path} as an MLflow model took over {timeout:.0f}s") from None
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise ModelLoggingError(f"{export_path} could not be saved as an MLflow model (exit code "
                                f"{done.returncode}):\n{tail}")


def log_exported_model(client: Any, run_id: str, experiment_id: str, export_path: str, legacy_keras: bool,
                       step: int = 0, params: dict[str, str] | None = None) -> str:
    """Log the model at ``export_path`` as the model ``model`` of run ``run_id``; returns its URI
    (``models:/<model id>`` on MLflow 3, ``runs:/<run id>/model`` on MLflow 2).

    Args:
        client: an ``mlflow.MlflowClient`` of the run's tracking store.
        run_id, experiment_id: the MLflow run and its experiment.
        export_path: what ``ctx.export`` saved (a SavedModel directory or a ``.keras`` file), read
            from the driver.
        legacy_keras: whether the nodes saved it with tf-keras.
        step: the training step it was exported at. params: the run's params, kept on the model too.

    Raises:
        ModelLoggingError: it could not be saved in MLflow's format. MlflowException: the store
            refused it (the logged model is then marked failed).
    """
    from mlflow.models import Model

    with tempfile.TemporaryDirectory(prefix="tfos-mlflow-model-") as tmp:
        out = os.path.join(tmp, MODEL_NAME)
        save_mlflow_model(export_path, out, legacy_keras)
        if not hasattr(client, "create_logged_model"):  # MLflow 2
            spec = Model.load(out)
            spec.run_id, spec.artifact_path = run_id, MODEL_NAME
            spec.save(os.path.join(out, "MLmodel"))
            client.log_artifacts(run_id, out, MODEL_NAME)
            _record_in_history(client, run_id, spec)
            return f"runs:/{run_id}/{MODEL_NAME}"
        from mlflow.entities import LoggedModelOutput, LoggedModelStatus

        model = client.create_logged_model(experiment_id, name=MODEL_NAME, source_run_id=run_id, params=params)
        try:
            client.log_outputs(run_id, [LoggedModelOutput(model.model_id, step)])
            spec = Model.load(out)  # the ids MLflow's own log_model writes into the model's MLmodel file
            spec.run_id, spec.model_id, spec.model_uuid = run_id, model.model_id, model.model_id
            spec.artifact_path = model.artifact_location
            spec.save(os.path.join(out, "MLmodel"))
            client.log_model_artifacts(model.model_id, out)
        except BaseException:
            client.finalize_logged_model(model.model_id, LoggedModelStatus.FAILED)
            raise
        client.finalize_logged_model(model.model_id, LoggedModelStatus.READY)
    return f"models:/{model.model_id}"


#: The run tag in which MLflow 2 lists the models a run logged (its runs table's Models column).
MODEL_HISTORY_TAG = "mlflow.log-model.history"


def _record_in_history(client: Any, run_id: str, spec: Any) -> None:
    """Add the model ``spec`` to the run's model history, as MLflow 2's own ``log_model`` does
    after logging the files (its tracking stores append the model's tags dict to this tag)."""
    history = json.loads(client.get_run(run_id).data.tags.get(MODEL_HISTORY_TAG) or "[]")
    client.set_tag(run_id, MODEL_HISTORY_TAG, json.dumps([*history, spec.get_tags_dict()]))
