"""MLflow on a node: the calls a node's function makes go to the run's one MLflow run, through
the driver.

When a run is logged to MLflow, every node's process gets ``MLFLOW_TRACKING_URI=tfos-relay:chief``
(the chief) or ``tfos-relay:muted`` (the others) and ``MLFLOW_RUN_ID`` (the run's id), and none of
MLflow's tracking credentials. MLflow finds the ``tfos-relay`` store through its plugin entry
points (``pyproject.toml``): ``mlflow.start_run()`` and ``mlflow.autolog()`` then resume the one run
instead of creating one per node; on the chief, metrics, params and tags go to the driver over the
status pipe and the control channel (``MlflowCalls``), where the run's tracker logs them; on the
other nodes they are dropped, so nothing is logged twice. Artifacts and models logged on a node are
dropped (with one warning): the driver logs the model ``ctx.export`` saved.

Autologging on a node (``mlflow.autolog()``, ``mlflow.tensorflow.autolog()``, ``mlflow.keras.autolog()``)
logs params and metrics only (``node_autolog``): no dataset, since describing one makes MLflow read
it whole, which a repeated ``tf.data`` dataset never ends (mlflow/mlflow#9600: the node's memory
grows until the host runs out), and no model, which the driver logs.

This module is what MLflow loads for the plugin in any process that imports it (the driver's
too), so it imports nothing of MLflow itself; ``relaystore`` holds the store.
"""

from __future__ import annotations

import functools
import inspect
import sys
from types import ModuleType
from typing import Any

from .afterimport import after_import

SCHEME = "tfos-relay"
CHIEF, MUTED = f"{SCHEME}:chief", f"{SCHEME}:muted"

#: MLflow's tracking credentials: a node gets none of them (nor needs them).
CREDENTIALS = ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD",
               "MLFLOW_TRACKING_CLIENT_CERT_PATH", "MLFLOW_TRACKING_SERVER_CERT_PATH", "MLFLOW_TRACKING_AUTH")


def relay_env(env: dict[str, str], run_id: str, chief: bool) -> None:
    """Point MLflow in the node process whose environment is ``env`` at the relay, without credentials."""
    for name in CREDENTIALS:
        env.pop(name, None)
    env["MLFLOW_TRACKING_URI"] = CHIEF if chief else MUTED
    env["MLFLOW_RUN_ID"] = run_id
    env["MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING"] = "false"  # the driver logs every node's, named by node


#: What autologging does not log on a node, whatever the function asks (see the module's doc).
NOT_ON_NODES = {"log_datasets": False, "log_models": False}
AUTOLOG_FLAVORS = ("mlflow.tensorflow", "mlflow.keras")


def limit_autolog() -> None:
    """Hold MLflow's TensorFlow and Keras autologging in this node process to ``NOT_ON_NODES``, as
    each flavor is imported (MLflow itself is imported only if the function does)."""
    for name in AUTOLOG_FLAVORS:
        after_import(name, node_autolog)


def node_autolog(flavor: ModuleType) -> None:
    """Replace ``flavor.autolog`` by the same function with ``NOT_ON_NODES`` forced. MLflow's
    ``mlflow.autolog()`` finds the flavor's ``autolog`` by name, and its parameters through
    ``functools.wraps``, so it is held the same."""
    autolog = getattr(flavor, "autolog", None)
    if autolog is None or getattr(autolog, "tfos_node", False):
        return
    signature = inspect.signature(autolog)
    forced = {k: v for k, v in NOT_ON_NODES.items() if k in signature.parameters}

    @functools.wraps(autolog)
    def held(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind_partial(*args, **kwargs)
        if not bound.arguments.get("disable", False):
            asked = [k for k in forced if bound.arguments.get(k, signature.parameters[k].default)]
            if asked:
                _say(f"[tfos] MLflow autologging on this node logs params and metrics only ({', '.join(asked)} "
                     "off: the driver logs the run's model, and describing a repeated dataset never ends, "
                     "mlflow/mlflow#9600)")
            bound.arguments.update(forced)
        return autolog(*bound.args, **bound.kwargs)

    held.tfos_node = True  # type: ignore[attr-defined]
    flavor.autolog = held


@functools.cache
def _say(line: str) -> None:  # once per process
    print(line, file=sys.stderr)


def relay_store(store_uri: str | None = None, artifact_uri: str | None = None) -> Any:
    """MLflow's builder of the ``tfos-relay`` tracking store (entry point ``mlflow.tracking_store``)."""
    from .relaystore import RelayStore

    return RelayStore(relays=store_uri == CHIEF)


def relay_artifacts(artifact_uri: str, tracking_uri: str | None = None, registry_uri: str | None = None) -> Any:
    """MLflow's builder of the node's artifact repository (entry point ``mlflow.artifact_repository``)."""
    from .relaystore import DroppedArtifacts

    return DroppedArtifacts(artifact_uri, tracking_uri=tracking_uri, registry_uri=registry_uri)
