"""``TFCluster`` with TensorFlowOnSpark's names: ``run`` starts a cluster and returns a handle whose
``train``/``inference`` feed it Spark data (InputMode.SPARK) and whose ``shutdown`` waits for it.
Existing TFoS programs change only their import line.

InputMode.SPARK on a cluster without a task slot beyond the nodes' for every fed node
(TensorFlowOnSpark's own layout, one core per executor; local[3] for two nodes; or any cluster where
every task needs a GPU) cannot feed every node at once from extra Spark tasks: there, ``run`` returns
at once and the gang starts when the data arrives, in ``train`` or ``inference``, each node fed by
its own task (``Run.start(data)``, in-stage feeding). With the spare slots the nodes start in ``run``
and are fed over the network, as often as ``train`` is called."""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..runtime.driver.diagnosis import preflight
from ..runtime.driver.feed.data import FeedSummary
from ..runtime.driver.run.lifecycle import RunState
from ..runtime.wire.plan import FOREGROUND_ROLES
from ..tracking.run import TrackedRun

if TYPE_CHECKING:
    from ..tensorboard.attach import TensorBoardHandle

QUEUES = ("input", "output", "error")  # TensorFlowOnSpark's default queue names


class InputMode:
    """How data reaches the nodes: TensorFlow reads it itself, or Spark feeds it."""

    TENSORFLOW = 0
    SPARK = 1


class TFCluster:
    """A running cluster, returned by :func:`run`. ``run_handle`` is the underlying :class:`Run`,
    whose ``events`` stream feeds every view; ``tensorboard`` its TensorBoard (a
    ``tfos_notebook.tensorboard.TensorBoardHandle``) with ``tensorboard=True``, else None."""

    def __init__(self, run_handle: TrackedRun, input_mode: int, tensorboard: Any = None, in_stage: bool = False,
                 sc: Any = None, queues: list[str] | None = None) -> None:
        self.run_handle = run_handle
        self.input_mode = input_mode
        self.tensorboard = tensorboard
        self.in_stage = in_stage  # the gang starts with the data, in train() or inference()
        self.sc = sc
        self.queues = list(queues) if queues is not None else list(QUEUES)
        self.num_executors = len(run_handle.roles)
        self.working_dir = os.getcwd()

    @property
    def defaultFS(self) -> str:  # noqa: N802  (TensorFlowOnSpark's name)
        """The Hadoop default filesystem the nodes resolve paths against (``ctx.defaultFS``)."""
        return self.run_handle.backend.default_fs()

    @property
    def cluster_info(self) -> list[dict[str, Any]]:
        """One dict per node, in executor order, with TensorFlowOnSpark's keys: ``executor_id``,
        ``host``, ``job_name``, ``task_index``, ``port`` (its TensorFlow port), ``tb_port`` (0:
        the TensorBoard runs on the driver, see ``tensorboard_url()``); empty until every node
        registered (with in-stage feeding, until ``train``/``inference`` started them)."""
        return [{"executor_id": n.task, "host": n.host, "job_name": n.role, "task_index": n.index, "port": n.port,
                 "tb_port": 0} for n in self.run_handle.nodes if n.port]

    @property
    def cluster_spec(self) -> dict[str, list[str]]:
        return self.run_handle.cluster_spec

    @property
    def cluster_id(self) -> str:
        return self.run_handle.run_id

    def tensorboard_url(self) -> str | None:
        """Where a browser opens the cluster's TensorBoard (None without ``tensorboard=True``)."""
        return self.tensorboard.url if self.tensorboard is not None else None

    def train(self, dataRDD: Any, num_epochs: int = 0, feed_timeout: float = 600, qname: str = "input") -> Any:  # noqa: N803
        """*InputMode.SPARK*: feed an RDD or DataFrame to the training nodes ``num_epochs`` times
        (0 means 10, as in TensorFlowOnSpark); returns a ``FeedSummary`` once all is fed. The feed
        stays open for more ``train`` calls until ``shutdown``. See :meth:`Run.train`.

        Args:
            feed_timeout: seconds a node may leave fed data untouched before ``FeedTimeout``.
            qname: one of the cluster's ``queues`` (each node has one data feed, whatever its name).
        """
        self._require_spark("train", qname)
        if num_epochs < 0:
            raise ConfigError(f"num_epochs cannot be negative, got {num_epochs}")
        if not self.in_stage:
            return self.run_handle.train(dataRDD, num_epochs or 10, feed_timeout, end_feed=False)
        run = self._start_in_stage("train", dataRDD, epochs=num_epochs or 10, feed_timeout=feed_timeout)
        started = time.monotonic()
        run.wait()
        rows = run.instage.rows_per_node()
        epochs = run.instage.epochs_fed()
        return FeedSummary(epochs, sum(rows.values()), time.monotonic() - started, epochs < (num_epochs or 10), rows)

    def inference(self, dataRDD: Any, feed_timeout: float = 600, qname: str = "input", schema: Any = None,  # noqa: N803
                  keep: list[str] | None = None) -> Any:
        """*InputMode.SPARK*: the nodes' predictions for every row, lazily: an RDD (one result per
        row, in order, each the object the node gave ``batch_results``) for an RDD, a DataFrame
        (``keep`` columns next to the predictions) for a DataFrame. See :meth:`Run.inference`."""
        self._require_spark("inference", qname)
        if not self.in_stage:
            return self.run_handle.inference(dataRDD, feed_timeout, schema, keep)
        return self._start_in_stage("inference", dataRDD, predict=True, keep=keep,
                                    feed_timeout=feed_timeout).predictions()

    def _start_in_stage(self, what: str, data: Any, **kwargs: Any) -> TrackedRun:
        run = self.run_handle
        if run.state is not RunState.NEW:
            raise ConfigError(f"TFCluster.{what}(): this cluster has no task slot beside its nodes, so its nodes "
                              "were started with the data of the first train() or inference() call and take no "
                              "more: feed all epochs in one train(data, num_epochs) call, or give the cluster a "
                              "spare slot per feeding task")
        run.start(data, **kwargs)
        return run

    def _require_spark(self, what: str, qname: str) -> None:
        if self.input_mode != InputMode.SPARK:
            raise ConfigError(f"TFCluster.{what}() needs a cluster started with input_mode=InputMode.SPARK")
        if qname not in self.queues:
            raise ConfigError(f"TFCluster.{what}(qname={qname!r}): unknown queue; this cluster has {self.queues}")

    def shutdown(self, ssc: Any = None, grace_secs: float = 0, timeout: float = 259200) -> Any:
        """End the data feed (InputMode.SPARK), wait for the training nodes to finish, give
        ps/evaluator nodes ``grace_secs`` more, then stop them. Never stops the SparkContext.
        Returns the chief's return value.

        Args:
            ssc: a Spark StreamingContext: refused (Spark Streaming is not supported).
            grace_secs: seconds the ps/evaluator nodes get after the chief and workers finished.
            timeout: seconds to wait for the nodes (-1: no limit); then the cluster is stopped.

        Raises:
            NodeError: a node failed (its traceback); the run's other errors likewise.
            TimeoutError: the nodes were still running after ``timeout`` seconds (they are stopped).
        """
        if ssc is not None:
            raise ConfigError("Spark Streaming (ssc) is not supported; feed a DataFrame or RDD instead")
        self.run_handle.background_grace_secs = float(grace_secs)
        if self.in_stage and self.run_handle.state is RunState.NEW:  # never fed: nothing ran
            self.run_handle.stop()
            return None
        if self.input_mode == InputMode.SPARK and not self.in_stage:
            self.run_handle.end_feed()
        try:
            return self.run_handle.wait(timeout if timeout > 0 else None)
        except TimeoutError:
            if self.run_handle.done:
                raise
            self.run_handle.stop()
            raise TimeoutError(f"TFCluster.shutdown(timeout={timeout:g}): the nodes were still running, so the "
                               "cluster was stopped; raise the timeout (or -1 for none) if they need longer") from None


def run(sc, map_fun, tf_args, num_executors: int, num_ps: int = 0, tensorboard: bool = False,
        input_mode: int = InputMode.TENSORFLOW, log_dir: str | None = None, driver_ps_nodes: bool = False,
        master_node: str | None = "chief", reservation_timeout: float = 600, queues: list[str] | None = None,
        eval_node: bool = False, release_port: bool = True, **kwargs: Any) -> TFCluster:
    """Start ``map_fun(tf_args, ctx)`` on ``num_executors`` nodes and return once all registered.

    Args:
        sc: the SparkContext.
        map_fun: the function every node runs; ``ctx`` has job_name, task_index, cluster_spec...
        tf_args: passed to ``map_fun`` as is (argparse namespace, dict, list...).
        num_executors: nodes in the cluster, ps and evaluator included.
        num_ps: parameter-server nodes. master_node: ``"chief"`` (default) or None for workers only.
        eval_node: add an evaluator node. log_dir: handed to the nodes as ``ctx.log_dir``.
        tensorboard: start a TensorBoard on the driver that shows the nodes' event files live (see
            ``cluster.tensorboard_url()``); it stops 15 minutes after the run ends, or when this
            process exits.
        input_mode: ``InputMode.SPARK`` to feed the nodes with ``train``/``inference``: with a task
            slot to spare beside the nodes for every fed node they start now and are fed over the
            network; with fewer (one slot per node, local[3] for two nodes, or every task needing a
            GPU) they start with the data in the first ``train``/``inference`` call, each fed by its
            own task. ``InputMode.TENSORFLOW``
            otherwise.
        reservation_timeout: seconds for all nodes to register before failing with findings.
        driver_ps_nodes: refused (``ConfigError``): ps nodes run on executors.
        queues: names ``train``/``inference`` accept as ``qname`` (default ``input``, ``output``,
            ``error``); every node has one data feed.
        release_port: free each node's reserved port before ``map_fun`` starts (default); False
            leaves it bound in ``ctx.tmp_socket`` until ``map_fun`` calls ``ctx.release_port()``.
        kwargs: passed to :class:`tfos_notebook.Run` (``model_dir``, ``env``, ``gpus_per_node``...).

    Raises:
        PreflightError: the cluster cannot run the nodes (too few slots, dynamic allocation, GPUs).
        ReservationTimeout: not every node registered in time.
        ConfigError: impossible arguments. TensorBoardError: the TensorBoard did not start.
    """
    if driver_ps_nodes:
        raise ConfigError("driver_ps_nodes=True is not supported: ps nodes run on executors")
    if input_mode not in (InputMode.TENSORFLOW, InputMode.SPARK):
        raise ConfigError(f"input_mode must be InputMode.TENSORFLOW or InputMode.SPARK, got {input_mode!r}")
    handle = TrackedRun(sc, map_fun, tf_args, num_executors, num_ps=num_ps, master_node=master_node,
                        eval_node=eval_node, log_dir=log_dir, reservation_timeout=reservation_timeout,
                        input_mode="spark" if input_mode == InputMode.SPARK else "tensorflow",
                        release_port=release_port, **kwargs)
    board = _attach(handle, tensorboard)
    _echo_node_output(handle)
    if input_mode == InputMode.SPARK and not _slot_to_spare(handle, num_executors):
        return TFCluster(handle, input_mode, board, in_stage=True, sc=sc, queues=queues)
    try:
        handle.start()
        handle.wait_for_reservations(reservation_timeout)
    except BaseException:
        if board is not None:
            board.stop()
        raise
    return TFCluster(handle, input_mode, board, sc=sc, queues=queues)


def _attach(run: TrackedRun, tensorboard: bool) -> TensorBoardHandle | None:
    """Before the start, so that no event byte is missed: the run's TensorBoard (None without
    one), and its record in the runs registry (%tfos_runs, %%tfos_evaluate and JupyterLab find it)."""
    board = None
    if tensorboard:
        from ..tensorboard import attach_tensorboard

        board = attach_tensorboard(run)
    from ..notebook import tracker as registry

    registry.track(run).set_tensorboard(board)
    return board


def _echo_node_output(run: TrackedRun) -> None:
    """Outside a notebook's kernel (a script, ``spark-submit``), print each line the nodes print to
    this process's stderr as ``[role:index] line``: where TensorFlowOnSpark leaves them in every
    executor's stderr, the program's own output shows them. TensorFlow's known notices are left out
    here, as in the notebook's monitor; the run's events keep every line (``Log``)."""
    from ..notebook.frontend import ipython_shell

    if getattr(ipython_shell(), "kernel", None) is not None:  # the notebook shows them in the cell
        return
    from ..notebook.logfilter import is_noise
    from ..runtime.driver.events import Log

    def echo(event: Any) -> None:
        if isinstance(event, Log) and not is_noise(event.line):
            print(event.labelled(), file=sys.stderr, flush=True)

    run.events.subscribe(echo, replay=False)


def _slot_to_spare(run: TrackedRun, num_nodes: int) -> bool:
    """Whether the cluster runs, beside the nodes, a feeding task for every fed node at once
    (executors still starting get the run's ``preflight_wait``). With fewer, the network feed deals
    the partitions of one node at a time, and under a synchronous strategy the nodes fed first wait
    in their all-reduce for nodes whose data never comes: the nodes start in-stage instead."""
    fed = sum(role in FOREGROUND_ROLES for role, _ in run.roles)
    return preflight.wait_for_executors(run.backend, num_nodes + fed, run.preflight_wait) >= num_nodes + fed
