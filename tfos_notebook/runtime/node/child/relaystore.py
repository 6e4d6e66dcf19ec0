"""The ``tfos-relay`` MLflow tracking store of a node's process (see ``mlflowrelay``).

It knows one run, the run's (``MLFLOW_RUN_ID``): every run a node's function starts or resumes,
``mlflow.autolog()``'s included, is that one, always running (the driver ends it). ``log_batch``
sends the chief's metrics, params and tags to the driver over the status pipe; the other nodes'
are dropped. Tags under ``mlflow.`` describe the node's process (its user, its source file) and
are left to the driver. What a run or experiment store does beyond logging (searches, deletes,
renames) has nothing to act on here and says so.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
import uuid
from typing import TYPE_CHECKING

from mlflow.entities import Experiment, Run, RunData, RunInfo, RunStatus
from mlflow.exceptions import MlflowException
from mlflow.store.artifact.artifact_repo import ArtifactRepository
from mlflow.store.entities.paged_list import PagedList
from mlflow.store.tracking.abstract_store import AbstractStore

from ...wire.messages import MlflowCalls
from .statuspipe import current

if TYPE_CHECKING:
    from mlflow.entities import LoggedModel

log = logging.getLogger(__name__)

ARTIFACT_SCHEME = "tfos-relay-artifacts"  # this module's DroppedArtifacts (pyproject.toml's entry point)
EXPERIMENT_ID = "0"
MAX_PER_LINE = 200  # metric points, params and tags per status line
NOT_A_NODE = ("the tfos-relay tracking URI works only in a node's process of a run logged to MLflow: "
              "elsewhere set MLFLOW_TRACKING_URI to your tracking server")


def _refused(what: str) -> MlflowException:
    return MlflowException(f"{what} is not available on a node: the run's MLflow run is kept by the driver "
                           "(do it from the notebook, on the run's MLflow run)")


class RelayStore(AbstractStore):
    """MLflow's tracking store on a node (built by ``mlflowrelay.relay_store``); ``relays`` on the
    chief, whose calls go to the driver."""

    def __init__(self, relays: bool) -> None:
        super().__init__()
        if current() is None:
            raise MlflowException(NOT_A_NODE)
        self.relays = relays
        self.run_id = os.environ.get("MLFLOW_RUN_ID") or os.environ.get("TFOS_RUN_ID", "tfos")
        self.started = int(time.time() * 1000)
        self.models: dict[str, LoggedModel] = {}

    # -- the one run -----------------------------------------------------------------------------
    def get_run(self, run_id: str) -> Run:
        fields = {"run_id": self.run_id, "experiment_id": EXPERIMENT_ID, "user_id": "",
                  "status": RunStatus.to_string(RunStatus.RUNNING), "start_time": self.started, "end_time": None,
                  "lifecycle_stage": "active", "artifact_uri": f"{ARTIFACT_SCHEME}:/{self.run_id}",
                  "run_name": self.run_id}
        if "run_uuid" in inspect.signature(RunInfo).parameters:  # MLflow 2 names the run twice
            fields["run_uuid"] = self.run_id
        info = RunInfo(**fields)
        return Run(info, RunData())

    def create_run(self, experiment_id, user_id, start_time, tags, run_name) -> Run:
        return self.get_run(self.run_id)  # the one run: never one per node

    def update_run_info(self, run_id, run_status, end_time, run_name) -> RunInfo:
        return self.get_run(run_id).info  # the driver ends the run, with the run's own status

    def log_batch(self, run_id, metrics, params, tags) -> None:
        if not self.relays:
            return
        points = [(m.key, float(m.value), int(m.timestamp), int(m.step or 0)) for m in metrics]
        pairs = [(p.key, str(p.value)) for p in params]
        labels = [(t.key, str(t.value)) for t in tags if not t.key.startswith("mlflow.")]
        pipe = current()  # MLflow keeps a store per URI for the life of the process; the pipe is read each time
        while points or pairs or labels:
            pipe.send(MlflowCalls(metrics=tuple(points[:MAX_PER_LINE]), params=tuple(pairs[:MAX_PER_LINE]),
                                       tags=tuple(labels[:MAX_PER_LINE])))
            points, pairs, labels = points[MAX_PER_LINE:], pairs[MAX_PER_LINE:], labels[MAX_PER_LINE:]

    def log_inputs(self, run_id, datasets=None, models=None) -> None:
        return None  # data sets are described on the driver's side, if at all

    def log_outputs(self, run_id, models) -> None:
        return None

    def get_metric_history(self, run_id, metric_key, max_results=None, page_token=None) -> PagedList:
        return PagedList([], None)

    def _search_runs(self, experiment_ids, filter_string, run_view_type, max_results, order_by, page_token):
        return [], None

    def delete_run(self, run_id):
        raise _refused("deleting a run")

    def restore_run(self, run_id):
        raise _refused("restoring a run")

    def link_traces_to_run(self, trace_ids, run_id) -> None:
        return None

    # -- its experiment ----------------------------------------------------------------------------
    def _experiment(self, name: str = "tfos-relay") -> Experiment:
        return Experiment(EXPERIMENT_ID, name, f"{ARTIFACT_SCHEME}:/", "active")

    def search_experiments(self, view_type=None, max_results=None, filter_string=None, order_by=None,
                           page_token=None) -> PagedList:
        return PagedList([self._experiment()], None)

    def create_experiment(self, name, artifact_location=None, tags=None) -> str:
        return EXPERIMENT_ID  # the run's experiment is chosen on the driver

    def get_experiment(self, experiment_id) -> Experiment:
        return self._experiment()

    def get_experiment_by_name(self, experiment_name) -> Experiment:
        return self._experiment(experiment_name)

    def delete_experiment(self, experiment_id):
        raise _refused("deleting an experiment")

    def restore_experiment(self, experiment_id):
        raise _refused("restoring an experiment")

    def rename_experiment(self, experiment_id, new_name):
        raise _refused("renaming an experiment")

    # -- models: kept here only for the calls that make them (their files are dropped); the logged
    # models are MLflow 3's, which alone calls these ---------------------------------------------
    def create_logged_model(self, experiment_id, name=None, source_run_id=None, tags=None, params=None,
                            model_type=None) -> LoggedModel:
        from mlflow.entities import LoggedModel, LoggedModelStatus

        model_id = f"m-{uuid.uuid4().hex}"
        now = int(time.time() * 1000)
        model = LoggedModel(EXPERIMENT_ID, model_id, name or "model", f"{ARTIFACT_SCHEME}:/models/{model_id}", now,
                            now, model_type=model_type, source_run_id=source_run_id,
                            status=LoggedModelStatus.PENDING)
        self.models[model_id] = model
        return model

    def get_logged_model(self, model_id, allow_deleted=False) -> LoggedModel:
        if model_id not in self.models:
            raise _refused(f"reading the logged model {model_id}")
        return self.models[model_id]

    def finalize_logged_model(self, model_id, status) -> LoggedModel:
        model = self.get_logged_model(model_id)
        model.status = status
        return model

    def set_logged_model_tags(self, model_id, tags) -> None:
        return None

    def delete_logged_model_tag(self, model_id, key) -> None:
        return None

    def record_logged_model(self, run_id, mlflow_model) -> None:
        return None

    def search_logged_models(self, experiment_ids, filter_string=None, datasets=None, max_results=None,
                             order_by=None, page_token=None) -> PagedList:
        return PagedList([], None)


class DroppedArtifacts(ArtifactRepository):
    """Where a node's artifacts and models go: nowhere. Their files stay on the node (it says so
    once): the driver logs the model ``ctx.export`` saved."""

    warned = False

    def _drop(self, what: str) -> None:
        if not DroppedArtifacts.warned:
            DroppedArtifacts.warned = True
            log.warning("tfos_notebook: %s logged to MLflow on a node are dropped: the driver logs the run's "
                        "metrics, params and the model ctx.export() saves (mlflow.autolog(log_models=False) "
                        "spares the node the work)", what)

    def log_artifact(self, local_file, artifact_path=None) -> None:
        self._drop("artifacts")

    def log_artifacts(self, local_dir, artifact_path=None) -> None:
        self._drop("artifacts and models")

    def list_artifacts(self, path=None) -> list:
        return []

    def _download_file(self, remote_file_path, local_path):
        raise _refused("downloading an artifact")
