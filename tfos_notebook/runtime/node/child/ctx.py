"""``ctx``: what the user's function knows about its node, with TensorFlowOnSpark's names."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ....errors import ConfigError
from ...host.fuse import fuse_path
from ...host.paths import absolute_path
from ...wire.plan import FOREGROUND_ROLES

log = logging.getLogger(__name__)

TF1_REFUSALS = {
    "start_cluster_server": "TFNode.start_cluster_server is TensorFlow 1 API: TF_CONFIG is already set on every "
                            "node, so create a tf.distribute strategy instead (MultiWorkerMirroredStrategy, or "
                            "ParameterServerStrategy with num_ps > 0)",
    "export_saved_model": "TFNode.export_saved_model exports a TensorFlow 1 session: save a TensorFlow 2 model "
                          "with compat.export_saved_model(model, export_dir, is_chief) or ctx.export(model, "
                          "export_dir), called on every node",
}


def tf1_refused(call: str) -> ConfigError:
    """The error for a TensorFlow 1 call (``start_cluster_server``, ``export_saved_model``),
    naming its TensorFlow 2 replacement; TensorFlowOnSpark 2 refuses them too."""
    return ConfigError(TF1_REFUSALS[call])


def release_port(ctx: Any) -> None:
    """Close ``ctx.tmp_socket``, the socket holding a node's reserved port (a cluster started with
    ``release_port=False``), so that TensorFlow can bind the port; it is None afterwards. ``ctx``
    is any object with ``tmp_socket``; without a socket (the port was released before the
    function started) nothing happens."""
    if ctx.tmp_socket is None:
        log.debug("release_port(): the node's port was already released")
        return
    ctx.tmp_socket.close()
    ctx.tmp_socket = None


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
        mgr: the node's data feed (InputMode.SPARK) for ``TFNode.DataFeed(ctx.mgr)``; None otherwise.
        tmp_socket: the socket holding the node's reserved port (its address is this node's entry
            in ``cluster_spec``) when the cluster was started with ``release_port=False``, until
            ``release_port()``; None otherwise.

    Also: ``run_id``, ``host``, ``spark_executor_id``, ``gpus`` (the addresses Spark assigned that
    this node uses; ``CUDA_VISIBLE_DEVICES`` names the same GPUs, through the executor's own
    ``CUDA_VISIBLE_DEVICES`` when it has one),
    ``model_dir``, ``attempt``, ``log_dir``: this node's own log directory, named after its role
    (``<run log dir>/chief_0``...), which appears in the driver's TensorBoard as a run of that name,
    and ``model_dir_shared``: whether every node and the driver see the same ``model_dir`` (False for
    a path on each host's own disk: ``ctx.restore`` and ``ctx.callbacks`` then never resume from it,
    since the nodes would resume from different checkpoints). ``TF_CONFIG`` is already set in the
    environment.
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
    model_dir_shared: bool = True
    mgr: Any = None
    tmp_socket: Any = field(default=None, repr=False, compare=False)
    _status: Any = field(default=None, repr=False, compare=False)  # the child's statuspipe.StatusPipe
    _flusher: Any = field(default=None, repr=False, compare=False)
    _pace: Any = field(default=None, repr=False, compare=False)  # pace.Pace, in the node's process
    _savepoint: Any = field(default=None, repr=False, compare=False)  # savepoint.SavePoint, in the node's process

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
        """``path`` resolved against the default filesystem (see :func:`absolute_path`), as
        TensorFlow opens it on this node: a ``dbfs:/`` result through Databricks' FUSE mount
        (``dbfs:/Volumes/x`` as ``/Volumes/x``, ``dbfs:/x`` as ``/dbfs/x``), since TensorFlow has
        no ``dbfs:`` filesystem.

        Raises:
            FuseError: the mount that ``path`` needs is not there on this host.
        """
        return fuse_path(absolute_path(self.defaultFS, self.working_dir, path))

    def get_data_feed(self, train_mode: bool = True, qname_in: str = "input", qname_out: str = "output",
                      input_mapping: dict[str, str] | None = None) -> Any:
        """TensorFlowOnSpark's shortcut for ``TFNode.DataFeed(ctx.mgr, train_mode, ...)``."""
        from .feed.datafeed import DataFeed

        return DataFeed(self.mgr, train_mode, qname_in, qname_out, input_mapping)

    def release_port(self) -> None:
        """Free the port reserved for this node (``tmp_socket``), for TensorFlow's server to bind
        it. Needed only with ``release_port=False``; otherwise the port was released just before
        the function started, and this does nothing."""
        release_port(self)

    def start_cluster_server(self, num_gpus: int = 1, rdma: bool = False) -> Any:
        """TensorFlow 1's ``tf.train.Server`` set-up: refused, as in TensorFlowOnSpark 2.

        Raises:
            ConfigError: always, naming the TensorFlow 2 replacement.
        """
        raise tf1_refused("start_cluster_server")

    def export_saved_model(self, sess: Any, export_dir: str, tag_set: str, signatures: Any) -> None:
        """TensorFlow 1's session export: refused, as in TensorFlowOnSpark 2 (see :meth:`export`).

        Raises:
            ConfigError: always, naming the TensorFlow 2 replacement.
        """
        raise tf1_refused("export_saved_model")

    def export(self, model: Any, export_dir: str | None = None, timeout: float = 60.0) -> str | None:
        """Save the trained ``model`` as a SavedModel in ``export_dir``, and tell the driver where
        it is; call it on every node.

        The chief writes ``export_dir`` (default ``<model_dir>/export``; give one on storage the
        driver shares). Under MultiWorkerMirroredStrategy a save is collective, so the other
        workers take part too, writing a temporary directory that is removed at once; they first
        wait for each other at most ``timeout`` seconds, so an export called on the chief alone
        fails with ``ExportError`` instead of hanging. Without that strategy the other nodes return
        at once. A relative ``export_dir`` is resolved like :meth:`absolute_path`. When the run is
        logged to MLflow, the driver logs the export as the run's MLflow model
        (``mlflow.tensorflow.load_model("runs:/<run id>/model")``) once the run finished.
        Returns the directory written on the chief, None elsewhere.

        Raises:
            ValueError: no ``export_dir`` and the run has no model_dir.
        """
        from ...wire.messages import ModelExport
        from .export import export_saved_model, keras_of

        if export_dir is None:
            if not self.model_dir:
                raise ValueError("ctx.export(model) needs an export_dir, or a run with a model_dir (--model-dir) "
                                 "to export into")
            export_dir = f"{self.model_dir.rstrip('/')}/export"
        path = export_saved_model(model, export_dir, self.is_chief, timeout)
        if path is not None:
            self._emit(ModelExport(path, keras_of(model)))
        return path

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
        nulls, ragged arrays or types TensorFlow cannot hold (see runtime.node.feed.datafeed for
        MultiWorkerMirroredStrategy and uneven data).
        """
        from .feed.datafeed import feed_of, make_dataset

        return make_dataset(feed_of(self), batch_size, features, label, by_epoch, drop_remainder, prefetch)

    def predict(self, fn: Any, batch_size: int = 256, features: str | list[str] | None = None) -> int:
        """Answer the driver's ``inference``: call ``fn`` on each batch of fed rows (a numpy array
        for one column, else a dict of arrays) and send back its output, one result per row (an
        array, a list, a tensor, or a dict of them for several columns). Returns the rows answered
        once the feed ends (``shutdown`` / ``end_feed`` on the driver)."""
        from .feed.datafeed import feed_of, predict

        return predict(feed_of(self), fn, batch_size, features)

    def report(self, step: int, *, total: int = 0, examples: int = 0, **metrics: float) -> None:
        """Send training progress (step and scalar metrics such as ``loss``) to the driver's monitor.

        The steps between two reports also give the node's steps/s; ``total`` (the steps this node
        will run) gives the run's progress bar and ETA, ``examples`` (taken since the last report)
        its examples/s. Keras users get all of it from :meth:`callbacks`.
        """
        from ...wire.messages import StepReport

        if self._pace is not None:
            self._pace.reported(int(step), int(total), int(examples))
        self._emit(StepReport(int(step), {k: float(v) for k, v in metrics.items()}))

    def summary_writer(self, name: str = "", flush_secs: float = 1.0):
        """A ``tf.summary`` file writer under this node's log directory (``name``: a subdirectory),
        flushed every ``flush_secs`` so the driver's TensorBoard shows its points within about a
        second, and once more when the process exits."""
        from .summaries import Flusher, create_writer

        if self._flusher is None:
            self._flusher = Flusher(flush_secs)
        logdir = f"{self.log_dir.rstrip('/')}/{name}" if name else self.log_dir
        return create_writer(logdir, self._flusher)

    def callbacks(self, tensorboard: bool = True, checkpoint: bool = True, progress: bool = True,
                  backup: bool = True, flush_secs: float = 1.0, timing: bool = True, batch_size: int = 0,
                  **tensorboard_args: Any) -> list:
        """Keras callbacks wired to this run's directories, for ``model.fit(..., callbacks=ctx.callbacks())``.

        Args:
            tensorboard: a Keras TensorBoard callback writing to ``ctx.log_dir`` whose writers are
                flushed at every epoch end (and every ``flush_secs`` during an epoch when
                ``update_freq`` is per batch). Under a multi-worker strategy Keras writes events on
                worker 0 only; use :meth:`summary_writer` for per-worker curves.
            checkpoint: a ModelCheckpoint saving weights to ``ctx.model_dir`` at each epoch end
                (TensorFlow checkpoints ``ckpt-0001`` with tf-keras, ``ckpt-0001.weights.h5`` with
                Keras 3); skipped when the run has no model_dir.
            progress: report each epoch's metrics to the driver's monitor (``ctx.report``).
            backup: a Keras BackupAndRestore under ``ctx.model_dir/backup``, so that a run relaunched
                after a lost node resumes ``fit`` from the last finished epoch, and after a
                decommission notice from the step every node saved at (``keras_backup.py``); left out
                when the model dir is not shared (``model_dir_shared``), as the nodes would resume
                unevenly.
            timing: count the training's steps (the node reads the optimizer's step counter once a
                second on a thread of its own: nothing runs per step) for the monitor's progress bar,
                steps/s, ETA and the straggler finding, and for ``%tfos_profile --steps``.
            batch_size: the examples this node takes per step (under a multi-worker strategy the
                global batch divided by the number of workers), for examples/s, which the driver
                sums over the nodes; fed data (InputMode.SPARK) is counted without it.
            tensorboard_args: passed to the Keras TensorBoard callback (``update_freq``,
                ``histogram_freq``...).
        """
        from .summaries import keras_callbacks

        return keras_callbacks(self, self._pace, self._savepoint, tensorboard=tensorboard, checkpoint=checkpoint,
                               progress=progress, backup=backup, flush_secs=flush_secs, timing=timing,
                               batch_size=batch_size, **tensorboard_args)

    def restore(self, checkpoint) -> str | None:
        """Restore ``checkpoint`` (a ``tf.train.Checkpoint``) from the newest checkpoint in
        ``ctx.model_dir``, as a node does when the run is relaunched after a node was lost
        (``ctx.attempt`` > 0). Returns the checkpoint's path, or None when there is none yet, or
        when the model dir is not shared (``model_dir_shared``): every node then starts afresh,
        rather than some resuming from their host's checkpoints and others from nothing."""
        import tensorflow as tf

        latest = tf.train.latest_checkpoint(self.model_dir) if self.model_dir and self.model_dir_shared else None
        if latest:
            checkpoint.restore(latest)
        return latest

    def flush(self) -> None:
        """Flush the writers :meth:`summary_writer` made (done every ``flush_secs`` and as the
        process exits; a node leaving after its decommission checkpoint calls it)."""
        if self._flusher is not None:
            self._flusher.close()

    def step_boundary(self, step: int, save) -> None:
        """Call after each step of a custom training loop (Keras users get it from :meth:`callbacks`)
        with the step just finished and ``save``, a function that saves a checkpoint and returns its
        path (``tf.train.CheckpointManager(...).save``), called on every node as the strategy's
        saves need. It returns at once unless an executor of the run is decommissioning: then the
        nodes agree on a step, each calls ``save()`` at the end of it, and the run is relaunched
        from that checkpoint (on the slots the cluster still has: see ``min_workers``); this call
        does not return then. Resume with :meth:`restore`."""
        if self._savepoint is not None:
            self._savepoint.boundary(int(step), save)

    def connect(self, status: Any, pace: Any, savepoint: Any = None) -> None:
        """In the node's child process: send this context's messages down ``status`` (the child's
        ``statuspipe.StatusPipe``), count its steps with ``pace`` (a ``pace.Pace``) and meet the
        decommission checkpoint at ``savepoint`` (a ``savepoint.SavePoint``)."""
        self._status, self._pace, self._savepoint = status, pace, savepoint

    def _emit(self, msg) -> None:
        if self._status is not None:
            self._status.send(msg)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_status"] = None
        state["_flusher"] = None
        state["tmp_socket"] = None
        state["_pace"] = None
        state["_savepoint"] = None
        return state
