"""``MirroredStrategyRunner`` with spark-tensorflow-distributor's names, on top of :class:`Run`.

    from tfos_notebook import MirroredStrategyRunner
    MirroredStrategyRunner(num_slots=2, use_gpu=False).run(train, epochs=3)   # the value of worker 0

Programs written for ``spark_tensorflow_distributor`` change only their import line. Each slot is
one GPU (``use_gpu``) or one Spark task (CPU); the tasks run as one barrier stage with
``TF_CONFIG`` listing every task as a ``worker`` (no chief), as the original does, and ``train_fn``
runs in a child process of each task, where ``CUDA_VISIBLE_DEVICES`` holds the task's share of the
GPUs Spark gave it and ``BarrierTaskContext.get()`` answers for the task.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..runtime.driver.errors import ConfigError, PreflightError
from ..runtime.driver.events.finding import Finding
from ..runtime.driver.spark import active_session, backend_for
from ..runtime.host.gpus import visible_devices
from ..tracking.run import TrackedRun


@dataclass
class TrainFnNode:
    """The main function of every node of a runner whose ``train_fn`` builds its own strategy
    (``use_custom_strategy``): ``train_fn(**kwargs)`` (pickled into the Spark tasks)."""

    train_fn: Callable[..., Any]

    def __call__(self, kwargs: dict[str, Any], ctx: Any) -> Any:
        return self.train_fn(**kwargs)


@dataclass
class StrategyScopeNode(TrainFnNode):
    """``train_fn(**kwargs)`` inside a ``MultiWorkerMirroredStrategy`` scope, the runner's default.
    (Two classes rather than a flag: the nodes import TensorFlow ahead only when their function
    reaches it, ``driver/run/preimport.py``, and a flag's branch would name TensorFlow for both.)"""

    def __call__(self, kwargs: dict[str, Any], ctx: Any) -> Any:
        import tensorflow as tf

        with tf.distribute.MultiWorkerMirroredStrategy().scope():
            return self.train_fn(**kwargs)


def split_slots(num_slots: int, num_tasks: int) -> list[int]:
    """GPUs per task when ``num_slots`` GPUs are spread over ``num_tasks`` tasks (the first ones
    take the remainder), as spark-tensorflow-distributor spreads them."""
    return [num_slots // num_tasks + (i < num_slots % num_tasks) for i in range(num_tasks)]


class MirroredStrategyRunner:
    """Run a TensorFlow training function on Spark with ``MultiWorkerMirroredStrategy``.

    Args:
        num_slots: total GPUs (``use_gpu``) or Spark tasks (CPU) that train. With GPUs, the tasks
            are ``ceil(num_slots / spark.task.resource.gpu.amount)`` and task ``i`` uses
            ``num_slots // tasks + (i < num_slots % tasks)`` of the GPUs Spark assigned it. In
            local mode, GPUs of the driver (CPU: 1).
        local_mode: run ``train_fn`` here, in the driver's process, instead of on the executors.
        use_gpu: train on GPUs scheduled by Spark (``spark.task.resource.gpu.amount``); False for
            CPU, where every task sees no GPU whatever Spark gives it.
        gpu_resource_name: Spark's name of the GPU resource; only ``"gpu"`` is supported.
        use_custom_strategy: ``train_fn`` builds its own ``tf.distribute`` strategy; by default it
            runs inside a ``MultiWorkerMirroredStrategy`` scope made for it.
        spark: the SparkSession (default: the active one, or a new one).

    Attributes:
        sc: the SparkContext (``runner.sc.getConf()``...); a Spark Connect session has none.
        num_tasks: Spark tasks of a distributed run (None in local mode).
        run_handle: the :class:`Run` of the latest distributed ``run`` (events, every worker's value
            in ``results``).

    Raises:
        ConfigError: impossible arguments (``num_slots`` < 1, several CPU slots in local mode,
            another resource name).
        PreflightError: ``use_gpu`` but Spark schedules no GPUs to tasks, or a fraction of one.
    """

    def __init__(self, num_slots: int, local_mode: bool = False, use_gpu: bool = True,
                 gpu_resource_name: str = "gpu", use_custom_strategy: bool = False, *, spark: Any = None) -> None:
        if not isinstance(num_slots, int) or num_slots < 1:
            raise ConfigError(f"num_slots must be a whole number of at least 1, got {num_slots!r}")
        if use_gpu and gpu_resource_name != "gpu":
            raise ConfigError(f"gpu_resource_name={gpu_resource_name!r}: only Spark's 'gpu' resource is supported; "
                              "name the GPU resource 'gpu' in the Spark conf (spark.task.resource.gpu.amount...)")
        if local_mode and not use_gpu and num_slots > 1:
            raise ConfigError(f"local mode trains in the driver's one process: num_slots={num_slots} CPU slots "
                              "cannot run there; use num_slots=1, or local_mode=False to train on the executors")
        self.num_slots, self.local_mode, self.use_gpu = num_slots, local_mode, use_gpu
        self.use_custom_strategy = use_custom_strategy
        if spark is None:
            from pyspark.sql import SparkSession

            # the notebook's session, a Spark Connect one included (its builder needs the remote URL)
            spark = active_session() or SparkSession.builder.getOrCreate()
        self.spark = spark
        self.backend = backend_for(spark)
        self.run_handle: TrackedRun | None = None
        self.num_tasks = None if local_mode else self.get_num_tasks()

    @property
    def sc(self) -> Any:
        """The session's SparkContext.

        Raises:
            ConfigError: the session is a Spark Connect one, which has no SparkContext."""
        sc = self.backend.spark_context()
        if sc is None:
            raise ConfigError("runner.sc: a Spark Connect session has no SparkContext; read the conf with "
                              "runner.spark.conf.get(key) instead")
        return sc

    def get_num_tasks(self) -> int:
        """Spark tasks a distributed run uses: ``ceil(num_slots / spark.task.resource.gpu.amount)``
        with GPUs, ``num_slots`` on CPU.

        Raises:
            PreflightError: ``use_gpu`` but ``spark.task.resource.gpu.amount`` is not set, or below 1."""
        if not self.use_gpu:
            return self.num_slots
        return math.ceil(self.num_slots / self._task_gpu_amount())

    def _task_gpu_amount(self) -> int:
        amount = self.backend.conf("spark.task.resource.gpu.amount")
        if amount is None:
            raise PreflightError(f"cannot train on {self.num_slots} GPU slot(s):", [Finding(
                code="gpus_not_configured", cause="use_gpu=True, but Spark assigns no GPUs to tasks",
                evidence=("spark.task.resource.gpu.amount is not set",),
                remedy="set spark.executor.resource.gpu.amount, spark.task.resource.gpu.amount and a GPU discovery "
                       "script in the cluster's Spark conf, or pass use_gpu=False to train on CPUs")])
        if float(amount) < 1:
            raise PreflightError(f"cannot train on {self.num_slots} GPU slot(s):", [Finding(
                code="gpus_fractional", cause=f"each task gets a fraction of a GPU ({float(amount):g})",
                evidence=(f"spark.task.resource.gpu.amount={amount}",),
                remedy="set spark.task.resource.gpu.amount to a whole number of at least 1")])
        return int(float(amount))

    def run(self, train_fn: Callable[..., Any], **kwargs: Any) -> Any:
        """Call ``train_fn(**kwargs)`` on every task (or here, in local mode) and return the value
        of worker 0 (the function's own value in local mode).

        Raises:
            NodeError: ``train_fn`` failed on a task (its traceback). PreflightError: the cluster
            has too few free slots or GPUs. The SparkContext stays usable whatever happens.
        """
        if self.local_mode:
            return self._run_locally(train_fn, kwargs)
        gpus = split_slots(self.num_slots, self.num_tasks) if self.use_gpu else [0] * self.num_tasks
        self.run_handle = TrackedRun(self.backend, self._node(train_fn), kwargs,
                                     self.num_tasks, master_node=None, gpus_per_node=gpus,
                                     name=getattr(train_fn, "__name__", None))
        return self.run_handle.start().wait()

    def _node(self, train_fn: Callable[..., Any]) -> TrainFnNode:
        return (TrainFnNode if self.use_custom_strategy else StrategyScopeNode)(train_fn)

    def _run_locally(self, train_fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        devices: list[str] = []
        if self.use_gpu:
            owned = self.backend.driver_gpus()
            if len(owned) < self.num_slots:
                raise PreflightError(f"cannot train on {self.num_slots} GPU(s) of the driver:", [Finding(
                    code="driver_gpus_too_few", cause=f"the driver owns {len(owned)} GPU(s) in Spark's resources",
                    evidence=(f"driver GPU addresses: {owned}",),
                    remedy="set spark.driver.resource.gpu.amount and spark.driver.resource.gpu.discoveryScript, "
                           "lower num_slots, or pass use_gpu=False")])
            devices = visible_devices(owned[: self.num_slots], saved)
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
        try:
            return self._node(train_fn)(kwargs, None)
        finally:
            if saved is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = saved
