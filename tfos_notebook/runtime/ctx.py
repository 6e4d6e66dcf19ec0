"""``ctx``: what the user's function knows about its node, with TensorFlowOnSpark's names."""

from __future__ import annotations

import getpass
import json
from dataclasses import dataclass, field
from typing import IO, Any

HADOOP_SCHEMES = ("adl://", "abfs://", "abfss://", "dbfs:/", "file://", "gs://", "hdfs://", "oss://", "s3://",
                  "s3a://", "s3n://", "swift://", "viewfs://", "wasb://", "wasbs://")

FOREGROUND_ROLES = ("chief", "master", "worker")


def absolute_path(default_fs: str, working_dir: str, path: str) -> str:
    """Resolve ``path`` against the cluster's default filesystem, as TensorFlowOnSpark does.

    A path with a scheme is returned as is; an absolute path gets the default filesystem as prefix;
    a relative path resolves to the user's home on HDFS, or to the driver's working directory on a
    local filesystem.
    """
    if path.startswith(HADOOP_SCHEMES):
        return path
    fs = default_fs.rstrip("/")
    if path.startswith("/"):
        return f"{fs}{path}" if fs != "file:" else f"file://{path}"
    if fs.startswith(("hdfs://", "viewfs://")):
        return f"{fs}/user/{getpass.getuser()}/{path}"
    if fs.startswith("file:"):
        return f"file://{working_dir.rstrip('/')}/{path}"
    return f"{fs}/{path}"


@dataclass
class NodeContext:
    """The node's view of the cluster, passed to ``main_fun(args, ctx)``.

    Attributes (TensorFlowOnSpark names):
        executor_id / worker_num: this node's number in the cluster, 0..N-1 (the barrier task index).
        job_name: ``ps``, ``chief``, ``evaluator`` or ``worker``.
        task_index: index within ``job_name``.
        cluster_spec: ``{job_name: ["host:port", ...]}`` for every role, evaluator included.
        num_workers: number of chief + worker nodes (those that train).
        defaultFS: the Hadoop default filesystem (``fs.defaultFS``) of the driver.
        working_dir: the driver's working directory.

    Also: ``run_id``, ``host``, ``spark_executor_id``, ``gpus`` (addresses Spark assigned),
    ``model_dir``, ``log_dir`` and ``attempt``. ``TF_CONFIG`` is already set in the environment.
    """

    run_id: str
    executor_id: int
    job_name: str
    task_index: int
    cluster_spec: dict[str, list[str]]
    defaultFS: str = "file://"
    working_dir: str = ""
    host: str = ""
    spark_executor_id: str = ""
    gpus: list[str] = field(default_factory=list)
    model_dir: str | None = None
    log_dir: str | None = None
    attempt: int = 0
    mgr: Any = None
    _status: IO[str] | None = field(default=None, repr=False, compare=False)

    @property
    def worker_num(self) -> int:
        return self.executor_id

    @property
    def num_workers(self) -> int:
        return sum(len(v) for k, v in self.cluster_spec.items() if k in FOREGROUND_ROLES)

    @property
    def is_chief(self) -> bool:
        """True on the node that saves models and writes summaries (chief, or worker 0 without one)."""
        if "chief" in self.cluster_spec or "master" in self.cluster_spec:
            return self.job_name in ("chief", "master")
        return self.job_name == "worker" and self.task_index == 0

    def absolute_path(self, path: str) -> str:
        """``path`` resolved against the default filesystem (see :func:`absolute_path`)."""
        return absolute_path(self.defaultFS, self.working_dir, path)

    def dataset(self, batch_size: int, features: str | list[str] | None = None, label: str | None = None,
                by_epoch: bool = True, drop_remainder: bool = False, prefetch: int = 2) -> Any:
        """The data Spark feeds this node (``train`` on the driver) as a ``tf.data.Dataset`` of batches.

        Each pass over it is one epoch of ``train(data, num_epochs=N)``, so
        ``model.fit(ctx.dataset(64, label="label"), epochs=N)`` sees every row fed to this node once
        per epoch. Waits for the driver's first ``train`` to learn the columns' types and shapes.

        Args:
            batch_size: rows per batch (under MultiWorkerMirroredStrategy, the global batch).
            features: the column (a tensor) or columns (a dict) to give as inputs; default: every
                column but ``label``, as a tensor when that is a single column.
            label: the column to give as target; elements are then ``(features, label)``.
            by_epoch: False to run through every epoch in one pass (for ``steps_per_epoch``).
            drop_remainder: drop an epoch's last, smaller batch.
            prefetch: batches prepared ahead of the consumer.

        Arrays of equal length become dimensions (``array<array<float>>`` 28x28 -> ``[None, 28, 28]``),
        strings and binary become ``tf.string``. Raises ``FeedError`` without InputMode.SPARK, for
        nulls, ragged arrays or types TensorFlow cannot hold (see runtime.datafeed for
        MultiWorkerMirroredStrategy and uneven data).
        """
        from .datafeed import feed_of, make_dataset

        return make_dataset(feed_of(self), batch_size, features, label, by_epoch, drop_remainder, prefetch)

    def predict(self, fn: Any, batch_size: int = 256, features: str | list[str] | None = None) -> int:
        """Answer the driver's ``inference``: call ``fn`` on each batch of fed rows (a numpy array
        for one column, else a dict of arrays) and send back its output, one result per row (an
        array, a list, a tensor, or a dict of them for several columns). Returns the rows answered
        once the feed ends (``shutdown`` / ``end_feed`` on the driver)."""
        from .datafeed import feed_of, predict

        return predict(feed_of(self), fn, batch_size, features)

    def report(self, step: int, **metrics: float) -> None:
        """Send training progress (step and scalar metrics such as ``loss``) to the driver's monitor."""
        self._emit({"type": "step", "step": int(step), "metrics": {k: float(v) for k, v in metrics.items()}})

    def _emit(self, msg: dict) -> None:
        if self._status is not None:
            self._status.write(json.dumps(msg) + "\n")
            self._status.flush()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_status"] = None
        return state


def tf_config(cluster_spec: dict[str, list[str]], job_name: str, task_index: int) -> str:
    """The ``TF_CONFIG`` for one node. The evaluator is left out of the cluster, as TensorFlow's
    strategies expect; it learns its own role from ``task``."""
    cluster = {k: v for k, v in cluster_spec.items() if k != "evaluator" and v}
    return json.dumps({"cluster": cluster, "task": {"type": job_name, "index": task_index}})
