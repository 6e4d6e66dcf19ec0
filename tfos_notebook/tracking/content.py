"""What a training run puts in its MLflow run: params, tags, metric names, the final status.

Pure functions of the run's facts and events (no MLflow import), so every rule is tested without a
tracking server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..runtime.wire.plan import FOREGROUND_ROLES, node_name

# MLflow's limits (mlflow.utils.validation): values longer are cut to fit, so one long value never
# costs a whole batch.
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
MAX_KEY = 250

STATUS_OF_STATE = {"finished": "FINISHED", "failed": "FAILED", "stopped": "KILLED"}

TAG_RUN_ID = "tfos.run_id"
TAG_NODES = "tfos.nodes"
TAG_ROLES = "tfos.roles"
TAG_SPARK_APP = "tfos.spark_app_id"
TAG_INPUT_MODE = "tfos.input_mode"
TAG_ATTEMPTS = "tfos.attempts"
TAG_ATTEMPT = "tfos.attempt"  # tfos.attempt.1: how attempt 1 ended, when the run was relaunched after it
TAG_TENSORBOARD = "tfos.tensorboard_url"
TAG_ERROR = "tfos.error"
TAG_MODEL_ERROR = "tfos.model_error"
TAG_KERAS = "tfos.keras"  # which Keras the nodes' tf.keras is ("tf-keras 2.16.0")

_UNSAFE_KEY = re.compile(r"[^\w\-. /:]")


def safe_key(key: Any) -> str:
    """``key`` as an MLflow param, metric or tag name: characters MLflow refuses become ``_``."""
    return _UNSAFE_KEY.sub("_", str(key))[:MAX_KEY] or "_"


def run_params(roles: list[tuple[str, int]], input_mode: str, args: Any) -> dict[str, str]:
    """The run's params: ``workers``, ``ps``, ``evaluator`` and ``input_mode`` from the run itself,
    then the function's ``args`` by name (a mapping, or an object's attributes: argparse's
    Namespace, the magic's options); other ``args`` are one param ``args``. ``None`` values are left
    out; an ``args`` name that says otherwise than the run is kept as ``args.<name>``."""
    params = {
        "workers": str(sum(1 for r, _ in roles if r in FOREGROUND_ROLES)),
        "ps": str(sum(1 for r, _ in roles if r == "ps")),
        "evaluator": str(any(r == "evaluator" for r, _ in roles)),
        "input_mode": input_mode,
    }
    if isinstance(args, Mapping):
        items = dict(args)
    elif hasattr(args, "__dict__") and not isinstance(args, type):
        items = {k: v for k, v in vars(args).items() if not k.startswith("_")}
    else:
        items = {} if args is None else {"args": args}
    for name, value in items.items():
        if value is None:
            continue
        key, text = safe_key(name), str(value)[:MAX_PARAM_VALUE]
        if params.get(key, text) != text:
            key = safe_key(f"args.{name}")
        params[key] = text
    return params


def run_tags(run_id: str, roles: list[tuple[str, int]], input_mode: str, spark_app_id: str | None) -> dict[str, str]:
    """The tags a run starts with: its id, node count and roles, input mode, Spark application."""
    tags = {TAG_RUN_ID: run_id, TAG_NODES: str(len(roles)), TAG_ROLES: ",".join(node_name(r, i) for r, i in roles),
            TAG_INPUT_MODE: input_mode, TAG_ATTEMPTS: "1"}
    if spark_app_id:
        tags[TAG_SPARK_APP] = spark_app_id
    return tags


def error_tag(error: str) -> str:
    """A run's error as a tag value: the whole text when it fits, else its head and its last lines."""
    if len(error) <= MAX_TAG_VALUE:
        return error
    tail = error[-(MAX_TAG_VALUE // 2):]
    return error[:MAX_TAG_VALUE // 2 - 5] + "\n...\n" + tail


def node_id(role: str, index: int) -> str:
    """A node's name in system metric keys (``system/chief_0/...``), as its TensorBoard run is named."""
    return f"{role}_{index}"


def cpu_metrics(node: str, cpu_percent: float, memory_used_mb: float, memory_percent: float) -> dict[str, float]:
    """A node's CPU and memory sample under MLflow's names for system metrics of node ``node``."""
    prefix = f"system/{node}/"
    return {prefix + "cpu_utilization_percentage": cpu_percent,
            prefix + "system_memory_usage_megabytes": memory_used_mb,
            prefix + "system_memory_usage_percentage": memory_percent}


def gpu_metrics(node: str, gpus: tuple[tuple[str, int, int, int], ...]) -> dict[str, float]:
    """A node's GPU sample (``(address, utilisation %, used MiB, total MiB)`` each) under MLflow's
    names for system metrics (``system/<node>/gpu_<address>_utilization_percentage``...)."""
    out: dict[str, float] = {}
    for address, utilization, used_mib, total_mib in gpus:
        prefix = f"system/{node}/gpu_{safe_key(address)}_"
        out[prefix + "utilization_percentage"] = float(utilization)
        out[prefix + "memory_usage_megabytes"] = used_mib * 1.048576  # MiB as MLflow's megabytes (1e6 bytes)
        if total_mib:
            out[prefix + "memory_usage_percentage"] = 100.0 * used_mib / total_mib
    return out


def finite_metrics(values: Mapping[str, Any]) -> dict[str, float]:
    """The numbers among ``values`` (ints, floats, numpy or TensorFlow scalars) as floats; NaN and
    infinities kept, since a diverging loss is worth seeing; booleans, strings and the rest left out."""
    out = {}
    for key, value in values.items():
        if isinstance(value, (bool, str, bytes)):
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        out[safe_key(key)] = number
    return out


def result_metrics(value: Any, reported: set[str]) -> dict[str, float]:
    """The chief's returned dict as final metrics: its numbers under their names, or
    ``final_<name>`` for a name the run already logged as a curve (so the curve keeps only its steps)."""
    if not isinstance(value, Mapping):
        return {}
    return {(f"final_{k}" if k in reported else k): v for k, v in finite_metrics(value).items()}


class MetricOwners:
    """Each metric name is logged from one source only: the first that logs it. The sources are the
    run's own reports (``ctx.report``, the Keras callback of ``ctx.callbacks()``) and MLflow calls
    made on the chief (``mlflow.log_metric``, ``mlflow.autolog()``), which otherwise would draw the
    same curve twice (Keras's epoch ``loss`` at step ``epoch`` from autolog and ``epoch + 1`` from
    ``ctx.callbacks()``)."""

    def __init__(self) -> None:
        self._owner: dict[str, str] = {}
        self.dropped = 0

    def keep(self, source: str, metrics: Mapping[str, float]) -> dict[str, float]:
        """The part of ``metrics`` that ``source`` may log (the names it owns, or claims now)."""
        kept = {}
        for key, value in metrics.items():
            if self._owner.setdefault(key, source) == source:
                kept[key] = value
            else:
                self.dropped += 1
        return kept

    def owned(self) -> set[str]:
        """Every metric name logged so far."""
        return set(self._owner)
