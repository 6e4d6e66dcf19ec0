"""Driver side of a run: its lifecycle from pre-flight to outcome, one Spark barrier job per
attempt, and the feed facade.

``Run(sc, main_fun, args, num_nodes, ...).start()`` returns at once (after a sub-second
pre-flight) with the barrier job running under a tag of its own; the caller waits, polls the event
stream, or stops it. The run's state changes only through its :class:`~.lifecycle.Lifecycle`;
its attempts are its :class:`~.supervisor.Supervisor`'s, handed the run's parts it works with;
the nodes' messages are handled by a :class:`~.coordinator.Coordinator` per attempt; Spark is
reached only through the run's :class:`~.spark.backend.SparkBackend`. Nothing here calls
``sc.stop()`` or ``sys.exit()``: every failure ends this run only, and the Spark session stays
usable.

``Run`` owns parts and answers for them: its state, nodes, results and waits are its
:class:`~.outcome.RunOutcome`'s (``run.outcome``), its feeding its
:class:`~.feed.api.RunFeeding`'s (``run.feeding``), its control channel its
:class:`~.control.ControlPlane`'s (``run.control``), its limits its
:class:`~.supervised.AttemptLimits` (``run.limits``), its attempts, messages to the nodes and the
receiver of their event files its :class:`~.supervisor.Supervisor`'s (``run.supervisor``). Each
member it answers for is written below, delegating to its part; what only the runtime reads
(``outcome.started_at``, ``feeding.feeder``) is read on the part.

The run's lock is one re-entrant lock, its :class:`~.lifecycle.Lifecycle`'s (``run._lock``). It
guards the run's state (``state``, ``error``, ``attempt``: changed only by a transition, which
holds it), the current attempt's node table (each :class:`~.noderecord.NodeRecord`'s connection,
state and result, the cluster spec: :class:`~.coordinator.Coordinator`), how the attempt ends (the
supervisor's stop, relaunch and settling bookkeeping), the failure held back for a silent peer
(:class:`~.heartbeat.Heartbeat`) and the decommission checkpoint's notice and saves
(:class:`~.decommission.Decommission`, through its coordinator's lock). Those parts take it, and so
does ``Run`` in :meth:`Run.start` (the move to ``reserving``, the launch) and :meth:`Run.stop` (a
run stopped before it started; not to read ``state`` once, which needs no lock); the coordinator
calls its hooks (the supervisor's) with it held. The outcome reads the state and the node table
without it, one field at a time; the feeding, the control plane and the limits keep nothing it
guards. The nodes' connection threads take it for each message that changes a node, so what holds
it must be quick.

A class above the runtime attaches to a run at one point: :meth:`Run._before_submit`, called under
the lock once pre-flight passed and right before the job is submitted (``tfos_notebook.Run``
starts its MLflow logger there). ``relay_mlflow`` is all the runtime knows of MLflow: it tells the
nodes to send their MLflow calls to the driver, as events.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ...host.versions import uses_legacy_keras
from ...wire.plan import FOREGROUND_ROLES, NodePlan
from ..diagnosis.insight import Insight, Progress
from ..diagnosis.kerascheck import refuse_keras3_for_tf_keras
from ..diagnosis.watch import LiveDiagnosis
from ..errors import ConfigError, PreflightError, RunStopped
from ..events import EventStream, FeedPlanned
from ..events.finding import blockers
from ..feed.api import RunFeeding
from ..spark import backend_for
from .control import ControlPlane
from .lifecycle import Lifecycle, RunState
from .outcome import RunOutcome
from .preimport import preimports
from .roles import node_gpu_counts, plan_roles
from .storage import resolve_on_driver, run_log_dir
from .supervised import AttemptLimits
from .supervisor import Supervisor

if TYPE_CHECKING:
    from ...wire import messages as m
    from ..events.finding import Finding
    from ..feed.data import FeedSummary
    from ..feed.instage import InStageFeed
    from .noderecord import NodeRecord
    from .profiles import ProfileResult
    from .supervised import FileSink


class Run:
    """One launch of ``main_fun`` on a gang of Spark barrier tasks.

    Args:
        sc: the SparkContext or SparkSession (the user's; never stopped here).
        main_fun: ``main_fun(args, ctx)``, run on every node in a child process.
        args: passed to ``main_fun`` unchanged (must pickle).
        num_nodes: barrier tasks, one per node, ps and evaluator included.
        num_ps: parameter servers; master_node: ``"chief"`` (default), ``"master"`` or None;
        eval_node: add one evaluator.
        log_dir: where runs keep their events; this run writes to ``<log_dir>/<run_id>`` (its
            ``log_dir`` attribute), so runs never mix. A URI (``hdfs://``, ``dbfs:/``, ``s3a://``...)
            or a path under Databricks' FUSE mounts (a Unity Catalog volume ``/Volumes/...``, or
            ``/dbfs/...``) is shared storage: each node writes to
            ``<run's log_dir>/<role>_<index>`` there. Any other path, ``file://`` URIs included (or
            None: a temporary directory), is on each node's own disk, and the nodes ship what they
            write there to the driver (see ``set_file_sink``). ``ctx.log_dir`` is the node's own
            subdirectory. A relative path is made absolute against the driver's working directory.
        model_dir: handed to the nodes as ``ctx.model_dir`` (a relative path made absolute against
            the driver's working directory; a ``dbfs:/`` URI as the path of its FUSE mount, which
            TensorFlow can open). A local path is probed: unless every node sees the
            driver's files there, a ``model_dir_not_shared`` finding says so, nothing resumes from
            it after a relaunch (``ctx.model_dir_shared``), and the driver cannot evaluate it.
        reservation_timeout: seconds for the cluster to have a free task slot for every node (the
            run waits for them before it submits its job, with a ``waiting_for_slots`` finding
            naming what holds them) and every node to register, before the run fails with findings.
        gpus_per_node: GPUs each node needs from Spark's task resources, and uses: a node whose
            task holds more sees only the first ``gpus_per_node`` of them. 0: CPU only, or whatever
            ``spark.task.resource.gpu.amount`` gives. A sequence gives each node its own count, by
            task (0: that node sees no GPU, whatever its task holds).
        env: extra environment variables for the nodes' processes (set before they import TensorFlow,
            which they do while the cluster forms when ``main_fun`` uses it; ``TFOS_PREIMPORT=''``: not).
        legacy_keras: run ``tf.keras`` as tf-keras (Keras 2) on the nodes, ``TF_USE_LEGACY_KERAS=1``
            (None: wherever tf-keras is installed there; ``env`` setting ``TF_USE_LEGACY_KERAS`` wins).
            Each node registers with the Keras it runs (the monitor shows it). A Keras 3 object made
            here and handed to nodes that run tf-keras is refused with a ``ConfigError``.
        name: a label for views; defaults to the run id.
        preflight_wait: ``TFCluster.run`` only: seconds it waits for executors that are still
            starting before it decides whether a slot is free for feeding beside the nodes
            (:meth:`start` never waits for executors: the run does, in the background).
        retries: how many times a run whose node was lost (its process killed, its executor or
            Python worker gone) is relaunched; nodes resume from the latest checkpoint in
            ``model_dir`` through ``ctx.restore()`` or ``ctx.callbacks()``. An exception raised by
            the user's function is not retried: it would fail the same way again.
        input_mode: ``"tensorflow"`` (the function reads its own data) or ``"spark"``: each chief and
            worker serves a data feed that :meth:`train` and :meth:`inference` fill from Spark.
        feed_buffer_mb: with ``input_mode="spark"``, fed data a node holds before Spark has to wait.
        independent: the nodes run alone, not as one TensorFlow cluster (``TFParallel``), so no
            TensorFlow traffic passes between them (on a cluster that asks for encryption, several
            of them need no ``tensorflow.spark.distributor.ignoreSsl``).
        release_port: free each node's reserved port just before its function starts (default).
            False hands the socket that holds it to the function as ``ctx.tmp_socket``, which must
            call ``ctx.release_port()`` before TensorFlow binds the port.
        memory_limit_mb: the resident memory (MiB) each node's process, with what it starts, may
            reach before its memory guard stops it and the run fails with the reason (relaunched
            once: see ``runtime/node/task/memguard.py``). 0 (default): Spark's own
            ``spark.executor.pyspark.memory`` where set, else no cap; every node is stopped anyway
            when it grows while its host runs out of memory.
        min_workers: the fewest training nodes (chief and workers) a relaunch may run with. When an
            executor decommissions (a spot node taken away) the nodes save a checkpoint at their
            next step and the run is relaunched from it (not counted in ``retries``); a relaunch
            that does not find the slots of every node within ``replacement_grace`` seconds runs
            with as many training nodes as the free slots hold, down to ``min_workers``. None
            (default): the run never shrinks.

    ``relay_mlflow`` (False until set): the nodes send their MLflow calls to the driver, where they
    are ``MlflowCalled`` events, rather than to a tracking store of their own; set by whoever logs
    the run to MLflow, in :meth:`_before_submit`.
    """

    def __init__(self, sc, main_fun, args: Any, num_nodes: int, *, num_ps: int = 0,
                 master_node: str | None = "chief", eval_node: bool = False, log_dir: str | None = None,
                 model_dir: str | None = None, reservation_timeout: float = 600.0,
                 gpus_per_node: int | Sequence[int] = 0,
                 env: dict[str, str] | None = None, legacy_keras: bool | None = None, name: str | None = None,
                 preflight_wait: float = 30.0, stop_grace_secs: float = 5.0, retries: int = 2,
                 input_mode: str = "tensorflow", feed_buffer_mb: float = 64, independent: bool = False,
                 release_port: bool = True, memory_limit_mb: float = 0,
                 min_workers: int | None = None, replacement_grace: float = 60.0) -> None:
        if not callable(main_fun):
            raise ConfigError(f"main_fun must be a function taking (args, ctx), got {type(main_fun).__name__}")
        refuse_keras3_for_tf_keras(main_fun, args, uses_legacy_keras(legacy_keras, env or {}, {}))
        self.roles = plan_roles(num_nodes, num_ps, master_node, eval_node)
        if input_mode not in ("tensorflow", "spark"):
            raise ConfigError(f"input_mode must be 'tensorflow' or 'spark', got {input_mode!r}")
        self.backend = backend_for(sc)
        self.main_fun, self.args = main_fun, args
        self.preimport = preimports(main_fun)  # read from its code once; every attempt ships it
        self.input_mode = input_mode
        self.feed_buffer_bytes = int(feed_buffer_mb * (1 << 20)) if input_mode == "spark" else 0
        self.run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        self.name = name or self.run_id
        self.log_dir = run_log_dir(resolve_on_driver(log_dir), self.run_id)
        self.model_dir = resolve_on_driver(model_dir)
        trainers = sum(1 for role, _ in self.roles if role in FOREGROUND_ROLES)
        if min_workers is not None and not 1 <= min_workers <= trainers:
            raise ConfigError(f"min_workers must be between 1 and the {trainers} training nodes (chief and workers), "
                              f"got {min_workers}")
        if replacement_grace < 0:
            raise ConfigError(f"replacement_grace must be 0 or more seconds, got {replacement_grace!r}")
        self.limits = AttemptLimits(reservation_timeout=reservation_timeout, retries=retries,
                                    stop_grace_secs=stop_grace_secs, min_workers=min_workers or 0,
                                    replacement_grace=replacement_grace)
        self.gpu_counts = node_gpu_counts(gpus_per_node, len(self.roles))
        self.gpus_per_node = max(self.gpu_counts, default=0)
        self.env = dict(env or {})
        self.legacy_keras = legacy_keras
        self.preflight_wait = preflight_wait
        self.release_port = release_port
        self.relay_mlflow = False
        if memory_limit_mb < 0:
            raise ConfigError(f"memory_limit_mb must be 0 (no cap) or a number of MiB, got {memory_limit_mb!r}")
        self.memory_limit_mb = float(memory_limit_mb)
        self.events = EventStream()
        self.lifecycle = Lifecycle(self.run_id, self.events)
        self._lock = self.lifecycle.lock
        self.diagnosis = LiveDiagnosis(self.run_id, self.backend, self.events, self.roles,
                                      self.gpus_per_node, nodes_talk=not independent)
        self.insight = Insight(self.events, self.diagnosis.publish)  # stragglers, input-bound nodes
        self.control = ControlPlane(self.run_id, self.backend, self.model_dir)
        feeder = None
        if input_mode == "spark":
            from ..feed.feeder import Feeder

            feeder = Feeder(self, lambda: self.control.secret)
        self.supervisor = Supervisor(
            self.name, self.roles, lifecycle=self.lifecycle, events=self.events, diagnosis=self.diagnosis,
            backend=self.backend, limits=self.limits, job=self._job, release=self.release, feeder=feeder,
            model_dir=self.model_dir)
        self.outcome = RunOutcome(self.name, self.lifecycle, self.events, self.diagnosis, self.supervisor)
        self.feeding = RunFeeding(self.name, input_mode, feeder, self.wait)

    # -- start ---------------------------------------------------------------------------------
    def start(self, data: Any = None, epochs: int = 1, *, predict: bool = False, keep: list[str] | None = None,
              feed_timeout: float = 600.0) -> Run:
        """Pre-flight, then submit the barrier job in the background and return (at once: a run
        whose slots are not free yet, held by other jobs or applications or executors still to
        come, waits for them in the background, see ``reservation_timeout``).

        Args:
            data: a DataFrame or RDD to feed the nodes *in-stage* (``input_mode="spark"``): the
                barrier stage runs over ``data`` spread into one partition per node, and each
                training node's own task streams its share to it; no task slot beyond the nodes'
                is needed (see ``feed/instage.py``). Without it, feed later with :meth:`train`.
            epochs: passes over ``data`` (each pass is one epoch of ``ctx.dataset``/``DataFeed``).
            predict: the nodes answer with predictions (``ctx.predict``) rather than train; they
                come back from :meth:`predictions`. keep: DataFrame columns kept beside them.
            feed_timeout: seconds a node may take no data before its task gives up.

        Raises:
            ConfigError: the run was started (or stopped) before (a run starts once), or ``data``
                was given to a run whose input mode is not ``spark``.
            PreflightError: the cluster cannot run the nodes (findings say why and what to do).
            FeedError: ``data`` cannot be fed (not a DataFrame or RDD, ``keep`` on an RDD...).
        """
        if self.state is not RunState.NEW:
            raise ConfigError(f"run {self.name} was already started (it is {self.state}): a run starts once; "
                              "create a new one to launch again")
        if data is not None:
            self.feeding.plan_in_stage(data, self.roles, predict, epochs, feed_timeout, keep, self.backend)
        with self._lock:
            self.outcome.started_at = time.monotonic()
            self.lifecycle.transition(RunState.RESERVING)
        if self.instage is not None:
            self.events.publish(FeedPlanned(self.run_id, path="in-stage", detail=self.instage.describe()))
        try:
            self._preflight()
        except BaseException as e:
            self._end_before_launch(e)
            raise
        with self._lock:
            if self.state is RunState.STOPPING:  # stopped during pre-flight
                self._end_before_launch(RunStopped(f"run {self.name} was stopped"))
                return self
            try:
                self._before_submit()
            except BaseException as e:
                self._end_before_launch(e)
                raise
            self.supervisor.start()
        return self

    def _before_submit(self) -> None:
        """Where a class above the runtime attaches to the run: called by :meth:`start` under the
        run's lock once pre-flight passed (the control server is up), right before the job is
        submitted, so that a run refused by pre-flight or stopped meanwhile leaves nothing behind.
        What it sets (``relay_mlflow``) is in every attempt's plan. Whatever it raises ends the run
        before launch and is raised by ``start``. Nothing is attached here."""

    def _preflight(self) -> None:
        """Refuse a launch the cluster cannot run (``PreflightError``), then open what the nodes
        will reach (the run's :class:`~.control.ControlPlane`)."""
        findings = self.diagnosis.preflight()
        self.diagnosis.publish(findings)
        if blockers(findings):
            raise PreflightError(f"cannot launch {len(self.roles)} nodes:", blockers(findings))
        self.control.open(self.diagnosis.encryption, self.supervisor.on_message, self.supervisor.on_close)

    def _end_before_launch(self, error: BaseException) -> None:
        self.release()
        with self._lock:
            final = RunState.STOPPED if self.state is RunState.STOPPING else RunState.FAILED
            self.lifecycle.try_transition(final, error)

    def release(self) -> None:
        """What the run holds on the driver once it ends: its control server, its model dir probe.

        After inference data sets were handed out (``inference``), Spark may evaluate them after the
        run failed, and their tasks ask the control server why a node's feed is gone: it then stays
        up, answering only such questions, until ``end_feed``/``shutdown`` or ``QUERY_GRACE_SECS``."""
        feeder = self.feeding.feeder
        self.control.release(answer_queries=feeder is not None and feeder.handed_out and not feeder.ended
                             and self.error is not None)

    @property
    def control_address(self) -> tuple[str, int] | None:
        """Where the run's control server listens (None before ``start``)."""
        return self.control.address

    def plan(self, attempt: int) -> NodePlan:
        """What every node of ``attempt`` needs (shipped in the barrier tasks' closure)."""
        control = self.control
        return NodePlan(
            run_id=self.run_id, server_host=control.server.host, server_port=control.server.port,
            secret=control.secret, main_fun=self.main_fun, args=self.args, roles=self.roles, attempt=attempt,
            default_fs=control.default_fs, working_dir=os.getcwd(), model_dir=self.model_dir,
            model_dir_probe=control.probe, log_dir=self.log_dir,
            env=self.env, legacy_keras=self.legacy_keras, stop_grace_secs=self.stop_grace_secs,
            gpu_counts=self.gpu_counts,
            feed_buffer_bytes=self.feed_buffer_bytes, instage=self.instage.spec if self.instage else None,
            release_port=self.release_port,
            mlflow=self.relay_mlflow, preimport=self.preimport, memory_limit_mb=self.memory_limit_mb,
        )

    def _job(self, attempt: int) -> Callable[[], Any]:
        """The body of ``attempt``'s Spark job: the barrier stage, over the fed data when in-stage."""
        plan = self.plan(attempt)
        if self.instage is not None:
            return partial(self.instage.run_stage, self.backend, plan)
        return partial(self.backend.barrier, len(self.roles), plan)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the run: nodes kill their processes, the attempt's job is cancelled if it lingers.
        Returns when the run has ended (at once for a run that never started, which then cannot
        start). Raises ``TimeoutError`` if it has not ended within ``timeout`` seconds."""
        with self._lock:
            if self.state is RunState.NEW:
                self.lifecycle.transition(RunState.STOPPED, RunStopped(f"run {self.name} was stopped before it started"))
                return
        self.supervisor.request_stop()
        if not self.lifecycle.done.wait(timeout):
            raise TimeoutError(f"run {self.name} did not stop within {timeout:.0f}s")
        self.supervisor.join()

    # -- how it stands and ends (its RunOutcome) ------------------------------------------------
    @property
    def state(self) -> RunState:
        """The run's :class:`~.lifecycle.RunState` (see :attr:`RunOutcome.state <.outcome.RunOutcome.state>`)."""
        return self.outcome.state

    @property
    def attempt(self) -> int:
        """The current attempt's number (0 until the first relaunch)."""
        return self.outcome.attempt

    @property
    def error(self) -> BaseException | None:
        """The run's error once it is failing or has failed (None while it goes well)."""
        return self.outcome.error

    @property
    def done(self) -> bool:
        """Whether the run has ended (finished, failed or stopped)."""
        return self.outcome.done

    @property
    def job_group(self) -> str:
        """The tag (job group) of the current attempt's Spark job."""
        return self.outcome.job_group

    @property
    def cluster_spec(self) -> dict[str, list[str]]:
        """The current attempt's cluster spec once every node registered (else empty)."""
        return self.outcome.cluster_spec

    @property
    def nodes(self) -> list[NodeRecord]:
        """The current attempt's node records, in task order."""
        return self.outcome.nodes

    @property
    def results(self) -> dict[str, Any]:
        """Return values of the nodes whose function returned, by ``role:index``."""
        return self.outcome.results

    @property
    def result(self) -> Any:
        """The chief's return value (worker 0's when there is no chief)."""
        return self.outcome.result

    def node_states(self) -> dict[str, str]:
        """Each node's state by ``role:index``."""
        return self.outcome.node_states()

    def diagnose(self) -> list[Finding]:
        """Findings about this run and the cluster now (see :meth:`.outcome.RunOutcome.diagnose`)."""
        return self.outcome.diagnose()

    def wait_for_reservations(self, timeout: float | None = None) -> dict[str, list[str]]:
        """Block until every node registered; returns the cluster spec or raises the run's error."""
        return self.outcome.wait_for_reservations(timeout)

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the run ends; returns the chief's value or raises the run's error (see
        :meth:`.outcome.RunOutcome.wait`)."""
        return self.outcome.wait(timeout)

    # -- feeding (its RunFeeding) -----------------------------------------------------------------
    @property
    def instage(self) -> InStageFeed | None:
        """The in-stage feed planned by ``start(data)`` (None otherwise)."""
        return self.feeding.instage

    def train(self, data: Any, num_epochs: int = 1, feed_timeout: float = 600.0, end_feed: bool = True) -> FeedSummary:
        """Feed ``data`` to the training nodes ``num_epochs`` times (see :meth:`.feed.api.RunFeeding.train`)."""
        return self.feeding.train(data, num_epochs, feed_timeout, end_feed)

    def inference(self, data: Any, feed_timeout: float = 600.0, schema: Any = None,
                  keep: list[str] | None = None) -> Any:
        """The nodes' predictions for every row of ``data``, computed lazily by Spark (see
        :meth:`.feed.api.RunFeeding.inference`)."""
        return self.feeding.inference(data, feed_timeout, schema, keep)

    def predictions(self) -> Any:
        """The predictions of a run started with ``start(data, predict=True)``, once it finished."""
        return self.feeding.predictions()

    def end_feed(self, timeout: float = 600.0) -> None:
        """Tell the nodes that no more data will come (``DataFeed.should_stop()`` turns true)."""
        self.feeding.end_feed(timeout)

    # -- the nodes (its ControlPlane and Supervisor) --------------------------------------------
    @property
    def encrypted(self) -> bool:
        """Whether the control channel is TLS (the cluster asks for encryption)."""
        return self.control.encrypted

    def tell(self, nodes: list[str], msg: m.Message) -> None:
        """Send ``msg`` to the running nodes named ``nodes`` (``role:index``)."""
        self.supervisor.tell(nodes, msg)

    @property
    def file_sink(self) -> FileSink | None:
        """The receiver of the event files nodes ship (see :meth:`set_file_sink`)."""
        return self.supervisor.file_sink

    def set_file_sink(self, sink: FileSink | None) -> None:
        """Receive the event-file bytes nodes ship from node-local log directories (see
        :meth:`.supervisor.Supervisor.set_file_sink`)."""
        self.supervisor.set_file_sink(sink)

    # -- limits (its AttemptLimits, read by its supervisor as each attempt goes) ------------------
    @property
    def reservation_timeout(self) -> float:
        """Seconds for free slots, then every node registered."""
        return self.limits.reservation_timeout

    @reservation_timeout.setter
    def reservation_timeout(self, value: float) -> None:
        self.limits.reservation_timeout = value

    @property
    def retries(self) -> int:
        """Relaunches after a lost node."""
        return self.limits.retries

    @retries.setter
    def retries(self, value: int) -> None:
        self.limits.retries = value

    @property
    def stop_grace_secs(self) -> float:
        """How long an ending attempt's nodes have to stop before their processes are killed."""
        return self.limits.stop_grace_secs

    @stop_grace_secs.setter
    def stop_grace_secs(self, value: float) -> None:
        self.limits.stop_grace_secs = value

    @property
    def background_grace_secs(self) -> float:
        """How long after the training nodes the ps and evaluator nodes are stopped."""
        return self.limits.background_grace_secs

    @background_grace_secs.setter
    def background_grace_secs(self, value: float) -> None:
        self.limits.background_grace_secs = value

    @property
    def stall_secs(self) -> float:
        """No registration for this long: the reservation is diagnosed and its findings shown."""
        return self.limits.stall_secs

    @stall_secs.setter
    def stall_secs(self, value: float) -> None:
        self.limits.stall_secs = value

    @property
    def min_workers(self) -> int:
        """The fewest training nodes a relaunch may run with (0: the run never shrinks)."""
        return self.limits.min_workers

    @min_workers.setter
    def min_workers(self, value: int) -> None:
        self.limits.min_workers = value

    @property
    def replacement_grace(self) -> float:
        """How long a relaunch waits for the slots of every node before it shrinks."""
        return self.limits.replacement_grace

    @replacement_grace.setter
    def replacement_grace(self, value: float) -> None:
        self.limits.replacement_grace = value

    # -- insight -------------------------------------------------------------------------------
    def progress(self) -> Progress:
        """How the run goes: each node's steps/s, examples/s, step time and share of time waiting
        for fed data, and in total; how far it is and the ETA where the nodes say (Keras's epochs and
        steps with ``ctx.callbacks()``, ``ctx.report(step, total=N)``); the totals once it ended."""
        return self.insight.progress(ended=self.done)

    def profile(self, seconds: float | None = None, steps: int | None = None,
                nodes: list[str] | None = None) -> ProfileResult:
        """Capture a TensorFlow profiler trace of the training on ``nodes`` (``["worker:0"]``;
        default: every running node) for ``seconds`` seconds or ``steps`` steps, without stopping it,
        into the Profile tab of the run's TensorBoard (which must be attached). Returns once every
        trace is there (a :class:`~.profiles.ProfileResult`), within the capture's length and a few
        seconds.

        Raises:
            ConfigError: at once, when the run is not running (it ended, or is still reserving), the
                request is malformed, a node is unknown, or the run has no TensorBoard.
        """
        from .profiles import request_profile

        return request_profile(self, seconds, steps, nodes)

