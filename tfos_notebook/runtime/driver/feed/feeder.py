"""Driver side of InputMode.SPARK: feeds a DataFrame or RDD into a running :class:`Run`'s nodes.

``Run.train(data, num_epochs)`` waits for every training node's data feed, tells the nodes what
the data looks like (one sample row), then runs one ordinary Spark job per epoch whose tasks
stream their partitions to the nodes (feed.tasks), and marks the end of each epoch on
every node once the job is done, so that each pass over ``ctx.dataset`` is one epoch. While a job
runs, the driver watches the nodes' progress reports: a node whose buffered data waited longer
than ``feed_timeout`` fails the call with ``FeedTimeout``; a node that fails fails it with that
node's error; nodes that all called ``terminate()`` (or returned) end it early and quietly.

``Run.inference(data)`` returns, lazily, the predictions of the nodes aligned with the rows:
each task sends its rows and reads the answers back on the same connection (``inference.py``,
over this feeder's nodes and feeds).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ...host.timeouts import Deadline
from ...wire.feed import messages as fm
from ...wire.feed.protocol import CONNECTION_ERRORS, tell
from ...wire.feed.tasks import RECORD_DDL, TASK_TIMEOUT_MARGIN, TrainFeed
from ...wire.messages import FeedReport, FeedServing
from ...wire.plan import FOREGROUND_ROLES
from ..errors import FeedError, FeedTimeout, SparkJobError, TFOSError
from ..events import EpochFed, FeedPlanned, FeedProgress
from ..spark import error_summary

if TYPE_CHECKING:
    from ...wire.channel import RunSecret
    from ...wire.message import Message
    from ..events import EventStream
    from ..spark.backend import SparkBackend
from .data import DataSample, FeedSummary

PROGRESS_EVENT_SECONDS = 5.0
_NO_REPORT = FeedReport(received=0, consumed=0, buffered=0)


class FedNode(Protocol):
    """What the feeder reads of a node of its run (``run/noderecord.NodeRecord``)."""

    task: int
    role: str
    index: int


class FedRun(Protocol):
    """What the feeder reads of its run (``launch.Run``)."""

    run_id: str
    name: str
    roles: list[tuple[str, int]]
    events: EventStream
    backend: SparkBackend

    @property
    def job_group(self) -> str: ...

    @property
    def error(self) -> BaseException | None: ...

    @property
    def nodes(self) -> list[FedNode]: ...

    @property
    def done(self) -> bool: ...

    @property
    def control_address(self) -> tuple[str, int] | None: ...

    def release(self) -> None: ...


class Feeder:
    """The feeding half of a :class:`Run` whose input mode is ``spark``; ``secret()`` is the run's
    secret once it started (the nodes' feeds accept only connections that prove it)."""

    def __init__(self, run: FedRun, secret: Callable[[], RunSecret]) -> None:
        self.run = run
        self.secret = secret
        self._cond = threading.Condition()
        self._addresses: dict[int, tuple[str, int]] = {}
        self._progress: dict[int, tuple[float, FeedReport]] = {}
        self._published: dict[int, float] = {}
        self._passes = 0
        self.ended = False
        self.handed_out = False  # inference data sets were returned, which Spark may still evaluate

    # -- reports from the nodes (control-channel threads) ------------------------------------------
    def on_message(self, node, msg: FeedServing | FeedReport) -> None:
        with self._cond:
            if isinstance(msg, FeedServing):
                self._addresses[node.task] = (msg.host, msg.port)
            else:
                self._progress[node.task] = (time.monotonic(), msg)
            self._cond.notify_all()
        if isinstance(msg, FeedReport):
            now = time.monotonic()
            if msg.terminated or now - self._published.get(node.task, 0.0) >= PROGRESS_EVENT_SECONDS:
                self._published[node.task] = now
                self.run.events.publish(FeedProgress(
                    self.run.run_id, task=node.task, role=node.role, index=node.index, received=msg.received,
                    consumed=msg.consumed, buffered_bytes=msg.buffered, terminated=msg.terminated))

    # -- nodes ---------------------------------------------------------------------------------------
    def trainers(self) -> list:
        """The nodes that are fed (chief and workers), in task order."""
        return [nd for nd in self.run.nodes if nd.role in FOREGROUND_ROLES]

    def wait_for_feeds(self, timeout: float) -> list[tuple[str, int]]:
        """The data-feed address of every training node, waiting up to ``timeout`` seconds."""
        deadline = Deadline(timeout)
        with self._cond:
            while True:
                missing = [nd for nd in self.trainers() if nd.task not in self._addresses]
                if not missing:
                    return [self._addresses[nd.task] for nd in self.trainers()]
                self.raise_if_run_ended()
                if deadline.expired:
                    raise FeedTimeout(f"nodes {[nd.name for nd in missing]} did not open their data feed within "
                                      f"{timeout:.0f}s: their function has not started (see their logs), or the run "
                                      "was not started with input_mode='spark'")
                self._cond.wait(min(0.25, deadline.remaining()))

    def raise_if_run_ended(self) -> None:
        if self.run.error is not None:
            raise self.run.error
        if self.run.done:
            raise FeedError(f"run {self.run.name} has ended; start a new run to feed more data")

    def check_slots(self) -> None:
        slots, nodes = self.run.backend.cluster().total_slots, len(self.run.roles)
        if slots <= nodes:
            raise FeedError(f"the cluster runs {slots} tasks at once and the {nodes} nodes hold all of them, so no "
                            "task is left to feed them over the network: give the data when the run starts "
                            "(Run.start(data, epochs), %%tfos_train --data, or TFCluster.run before any train() on "
                            "such a cluster), which feeds each node from its own task, or add executors or cores")

    def _broadcast(self, addresses: list[tuple[str, int]], msg: Message) -> None:
        for nd, address in zip(self.trainers(), addresses, strict=True):
            if nd.state.terminal:
                continue
            try:
                tell(address, self.secret(), msg)
            except CONNECTION_ERRORS as e:
                if not self._ends_soon(nd):
                    self.raise_if_run_ended()
                    raise FeedError(f"cannot reach the data feed of {nd.name} at {address[0]}:{address[1]}: "
                                    f"{e}") from e

    def _ends_soon(self, nd, within: float = 10.0) -> bool:
        """Whether ``nd`` has ended or does within ``within`` seconds: a node whose function just
        returned closes its feed a moment before the driver hears of the result."""
        Deadline(within).wait_until(lambda: nd.state.terminal or self.run.error is not None, interval=0.1)
        return nd.state.terminal

    # -- train -----------------------------------------------------------------------------------------
    def train(self, data: Any, num_epochs: int = 1, feed_timeout: float = 600.0,
              end_feed: bool = True) -> FeedSummary:
        """See :meth:`Run.train`."""
        if num_epochs < 1:
            raise FeedError(f"num_epochs must be at least 1, got {num_epochs}")
        if self.ended:
            raise FeedError("the feed was already ended (train(..., end_feed=True) or shutdown): pass "
                            "end_feed=False to every train() call but the last")
        self.check_slots()  # first: with no free slot, even reading the sample row would wait forever
        source = DataSample.of(data)
        addresses = self.wait_for_feeds(feed_timeout)
        with self._cond:
            self._passes += 1
            seq = self._passes
        if seq == 1:
            self.run.events.publish(FeedPlanned(self.run.run_id, path="network", detail=(
                "network: Spark tasks beside the nodes stream each partition to a node over the network")))
        self._broadcast(addresses, fm.Sample(str(seq), source.sample_bytes()))
        started, total, epochs, partial = time.monotonic(), 0, 0, False
        per_node = {nd.name: 0 for nd in self.trainers()}
        for epoch in range(num_epochs):
            t0 = time.monotonic()
            pass_id = f"{seq}.{epoch}"
            records, cancelled = self._feed_pass(data, source, addresses, pass_id, feed_timeout,
                                                 f"epoch {epoch + 1}/{num_epochs}")
            rows = 0
            for rec in records:
                name = self.trainers()[rec["node"]].name
                per_node[name] += rec["rows"] + rec["skipped"]
                rows += rec["rows"] + rec["skipped"]
                partial = partial or rec["status"] in ("terminated", "unreachable")
            total += rows
            if cancelled or self._all_stopped():  # every node terminated or returned: nobody wants more
                partial = True
                break
            self._broadcast(addresses, fm.EpochEnd(pass_id))
            epochs += 1
            self.run.events.publish(EpochFed(self.run.run_id, epoch=epoch + 1, epochs=num_epochs, rows=rows,
                                             seconds=time.monotonic() - t0))
        if end_feed:
            self.end_feed(feed_timeout)
        return FeedSummary(epochs, total, time.monotonic() - started, partial, per_node)

    def _feed_pass(self, data, source: DataSample, addresses, pass_id: str, feed_timeout: float,
                   what: str) -> tuple[list[dict], bool]:
        if source.kind == "rdd" and source.schema is None:
            return [], False  # an empty RDD: nothing to send
        task = TrainFeed(self.secret(), addresses, pass_id, feed_timeout + TASK_TIMEOUT_MARGIN, source.rdd_schema)
        if source.kind == "df":
            def job():
                return [r.asDict() for r in data.mapInArrow(task.arrow_partition, RECORD_DDL).collect()]
        else:
            def job():
                return data.mapPartitionsWithIndex(task.rdd_partition).collect()
        records, cancelled = self._watch(job, feed_timeout, what)
        self._check_records(records, feed_timeout)
        return records, cancelled

    def _watch(self, job, feed_timeout: float, what: str) -> tuple[list[dict], bool]:
        """Run ``job`` under the run's feed tag, watching the nodes; returns its records and
        whether feeding stopped early because every node terminated or returned."""
        spark_job = self.run.backend.submit(f"{self.run.job_group}-feed",
                                           f"tfos_notebook feed {self.run.name}: {what}", job)
        reason: Any = None
        while not spark_job.join(0.25):
            if self.run.error is not None or self.run.done:
                reason = "run"
            elif self._all_stopped():
                reason = "stopped"
            else:
                reason = self._stalled(feed_timeout) or None
            if reason:
                spark_job.cancel()
                spark_job.join(30)
                break
        if reason == "stopped" or (reason == "run" and self.run.error is None):
            return [], True
        if reason == "run":
            raise self.run.error
        if reason:
            raise FeedTimeout(f"{', '.join(reason)} took no data for more than {feed_timeout:.0f}s while Spark fed "
                              f"{what}: its function is not reading the feed (ctx.dataset / DataFeed.next_batch) "
                              "or is stuck; fix the function, or raise feed_timeout if it is only slow to start")
        if spark_job.error is not None:
            if self.run.error is not None:
                raise self.run.error
            raise _job_error(spark_job.error, what)
        return spark_job.result(), False

    def _stalled(self, feed_timeout: float) -> list[str]:
        now, out = time.monotonic(), []
        with self._cond:
            for nd in self.trainers():
                at, msg = self._progress.get(nd.task, (now, _NO_REPORT))
                stalled = msg.stalled
                if msg.buffered:
                    stalled += now - at  # reports may stop while the function holds the interpreter
                if stalled > feed_timeout and not nd.state.terminal:
                    out.append(f"{nd.name} ({msg.buffered >> 20} MiB waiting)")
        return out

    def _all_stopped(self) -> bool:
        with self._cond:
            return all(nd.state.terminal or self._progress.get(nd.task, (0, _NO_REPORT))[1].terminated
                       for nd in self.trainers())

    def _check_records(self, records: list[dict], feed_timeout: float) -> None:
        for rec in records:
            nd = self.trainers()[rec["node"]]
            if rec["status"] == "timeout":
                raise FeedTimeout(f"{nd.name} took no data for more than {feed_timeout:.0f}s (partition "
                                  f"{rec['part']}): its function is not reading the feed or is stuck")
            if rec["status"] == "unreachable" and not nd.state.terminal:
                self.raise_if_run_ended()
                raise FeedError(f"partition {rec['part']} could not reach the data feed of {nd.name}: "
                                f"{rec['detail']}")

    # -- end -------------------------------------------------------------------------------------------
    def end_feed(self, timeout: float = 600.0) -> None:
        """Tell every training node that no more data will come: ``DataFeed.should_stop()`` turns
        true and ``ctx.dataset``/``ctx.predict`` loops end. Idempotent."""
        with self._cond:
            if self.ended:
                return
            self.ended = True
        if self.run.done:
            self.run.release()  # nothing is left to ask the run about its nodes
            return
        try:
            addresses = self.wait_for_feeds(timeout)
        except TFOSError:
            return  # the run ended, or its nodes never opened a feed: nothing waits for the end
        self._broadcast(addresses, fm.End())

def _job_error(e: BaseException, what: str) -> Exception:
    text = error_summary(e)
    for line in str(e).splitlines():
        for name, kind in (("FeedTimeout: ", FeedTimeout), ("FeedError: ", FeedError)):
            if name in line:
                return kind(line.split(name, 1)[1].strip())
    return SparkJobError(f"the Spark job feeding {what} failed: {text}")
