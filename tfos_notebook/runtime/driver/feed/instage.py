"""In-stage feeding: the data is fed inside the gang's own barrier stage.

When the data is known as the nodes start (``Run.start(data=...)``, ``%%tfos_train --data``, a
TensorFlowOnSpark program on a cluster with no spare slot), the driver spreads it over one
partition per node: a training node's partition holds its share of the rows, a ps or evaluator
node's partition is empty. The barrier stage runs over that data, so each node's own task holds
its partition and streams it to its TensorFlow process on the same host (the node's data feed,
over loopback). No extra task slot is needed, which is what a cluster with exactly one slot per
node, or one where every task needs a GPU, requires; and the data stays where Spark computed it.

Epochs: the first pass reads the partition from Spark and, when there are more epochs, writes it
to a node-local Arrow spill file as it goes, from which the node's feed reads every pass (the
spill is deleted at the end), so Spark computes the data once per attempt. Each pass is one epoch
of ``ctx.dataset`` / ``DataFeed``; after the last, the feed ends (``should_stop()``).

Inference: the node's task sends its rows and reads the predictions back on the same connection;
they leave the barrier stage as the task's output (Arrow IPC bytes per batch for a DataFrame, one
value per row for an RDD) and reach the driver, which makes them a DataFrame / RDD again.

This module is the driver's side; ``node/task/feed/instage`` is what each barrier task does, and
``wire/feed/stage`` what they share.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ...wire.feed.stage import FEED_KEY, OUTPUT_DDL, Dealer, InStage
from ...wire.plan import FOREGROUND_ROLES, node_name
from ..errors import FeedError
from ..spark.frames import arrow_frame
from .data import DataSample, pickled_batches

if TYPE_CHECKING:
    from ...wire.plan import NodePlan

HASH_SEED = 42  # Spark's seed for hash partitioning (Murmur3Hash in HashPartitioning)



def _murmur3_int(value: int, seed: int = HASH_SEED) -> int:
    """Spark's ``Murmur3_x86_32.hashInt`` (what ``hash(col)`` and hash partitioning compute)."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = (value & mask) * 0xCC9E2D51 & mask
    k1 = rotl(k1, 15) * 0x1B873593 & mask
    h1 = rotl(seed ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & mask
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & mask
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def partition_keys(num_tasks: int, tasks: list[int]) -> list[int]:
    """For each task in ``tasks``, an int key that ``repartition(num_tasks, key)`` sends to exactly
    that task's partition (hash partitioning: ``pmod(murmur3(key), num_tasks)``)."""
    keys: dict[int, int] = {}
    value = 0
    while len(keys) < len(set(tasks)):
        part = _murmur3_int(value) % num_tasks  # Python's % is pmod for a positive divisor
        if part in tasks and part not in keys:
            keys[part] = value
        value += 1
    return [keys[t] for t in tasks]


def spread(data: Any, roles: list[tuple[str, int]], backend: Any) -> tuple[Any, Any]:
    """``data`` as one partition per node, the rows dealt to the training nodes (chief, workers)
    and none to ps / evaluator nodes; and, for an RDD dealt out, the serializer of the batches of
    rows its partitions then hold (see ``Dealer``), else None.

    Data that already has one partition per node (where ``backend`` can tell without a job), every
    node a training node, is taken as it is: no shuffle. Where every node trains, an RDD whose
    partitions split evenly over the nodes, or a cached DataFrame whose cache's partitions do, is
    gathered whole partitions to a node, without a shuffle (``Gathered``). Otherwise an RDD's rows
    go through the shuffle in the batches PySpark pickled them in, not unpickled on the map side
    (``Dealer``), and a DataFrame's are dealt round-robin (``dealt_frame``)."""
    from pyspark import RDD

    n = len(roles)
    trainers = [t for t, (role, _) in enumerate(roles) if role in FOREGROUND_ROLES]
    all_train = len(trainers) == n
    if all_train and backend.partitions(data) == n:
        return data, None
    if isinstance(data, RDD):
        batches, serializer = pickled_batches(data)
        if all_train and backend.gatherable(batches, n):
            return Gathered(batches, n), serializer
        dealt = batches.mapPartitionsWithIndex(Dealer(tuple(trainers), serializer)).partitionBy(n, _identity)
        return dealt.values(), serializer
    if all_train and backend.gatherable(data, n):
        return Gathered(data, n), None
    return dealt_frame(data, n, trainers), None


def dealt_frame(df: Any, n: int, trainers: list[int]) -> Any:
    """``df`` as ``n`` partitions, its rows dealt round-robin by a shuffle to the ``trainers``'
    partitions: its columns plus ``FEED_KEY`` (the node tasks drop it)."""
    # In SQL, not pyspark.sql.functions: each of those asks the JVM for the caller's stack (and the
    # first imports IPython for it, 0.4 s in a script).
    keys = ", ".join(map(str, partition_keys(n, trainers)))
    deal = f"element_at(array({keys}), cast(monotonically_increasing_id() % {len(trainers)} as int) + 1)"
    return df.selectExpr("*", f"{deal} as {FEED_KEY}").repartition(n, FEED_KEY)


class Gathered:
    """Data gathered into one partition per node with no shuffle: Spark's ``coalesce`` (in the
    JVM) hands each node whole partitions of an RDD, as PySpark's pickled batches, or of a cached
    DataFrame's cache, as the column batches Spark SQL keeps it in (read back into rows as the
    cache's own scan reads them). A barrier stage may not span RDDs of other partition counts than
    its own, so each attempt first copies the gathered partitions into a local checkpoint (one job,
    in the JVM alone when Spark holds the data), which cuts that lineage, and the barrier stage
    reads them. Where the data is cached, each node gets the blocks of one executor, and the copy
    stays in that executor's memory when its free storage memory holds it twice over; otherwise it
    goes to the executors' local disks (see ``spark/gather.py``): either way the user's cached
    blocks are not evicted for it. About 3x cheaper than dealing the rows through a shuffle (for
    an RDD: Python on the map side, serialization and compression, a fetch). Whole partitions are
    only as even as the partitions are, so this is taken only when they split evenly over the
    nodes (the backend's ``gatherable``). A lost executor takes its blocks with it: every attempt
    gathers again (``attempt``), and lets go of its copy when its stage ends; a DataFrame whose
    cache was dropped since (or whose Spark reads its cache otherwise) is dealt by a shuffle."""

    def __init__(self, data: Any, n: int) -> None:
        self.data, self.n = data, n

    @contextmanager
    def attempt(self, backend: Any) -> Iterator[Any]:
        """What one attempt's barrier stage runs over (its partitions: one per node, copied until
        the block ends)."""
        gathered = backend.gather(self.data, self.n)
        if gathered is None:  # a DataFrame no longer cached, or whose cache this Spark reads otherwise
            yield dealt_frame(self.data, self.n, list(range(self.n)))
            return
        data, copy = gathered
        try:
            copy.count()  # writes the checkpoint
            yield data
        finally:
            copy.unpersist(False)


@contextmanager
def _stage_data(spread: Any, backend: Any) -> Iterator[Any]:
    """What one attempt's barrier stage runs over (a ``Gathered`` one's copy, for that attempt)."""
    if isinstance(spread, Gathered):
        with spread.attempt(backend) as gathered:
            yield gathered
    else:
        yield spread


def _identity(key: int) -> int:
    return key


def instage_for(data: Any, mode: str, epochs: int, timeout: float, keep: list[str] | None = None) -> InStage:
    """The nodes' half of feeding ``data`` in-stage, read with no Spark job before the gang: each
    node's task takes the sample row from its own partition, made Arrow in a DataFrame's schema,
    or an RDD's in the schema of that partition's first row."""
    if epochs < 1:
        raise FeedError(f"epochs must be at least 1, got {epochs}")
    sample = DataSample.of(data, read_row=False)
    return InStage(mode=mode, kind=sample.kind, epochs=epochs, sample=sample.sample_bytes(),
                   keep=tuple(keep or ()), timeout=timeout)


def collect_outputs(kind: str, outputs: list) -> tuple[list[dict], list]:
    """The barrier stage's outputs as ``(summaries, predictions)``: a DataFrame's are ``OUTPUT_DDL``
    rows (a JSON summary, or an Arrow IPC stream of predictions), an RDD's are Python objects
    (summary dicts, or one prediction per row)."""
    summaries: list[dict] = []
    predictions: list = []
    for out in outputs:
        if kind == "df":
            payload = bytes(out["payload"])
            if payload.startswith(b"{"):
                summaries.append(json.loads(payload))
            else:
                predictions.extend(pa.ipc.open_stream(pa.py_buffer(payload)))
        elif isinstance(out, dict) and out.get("_tfos_summary"):
            summaries.append(out)
        else:
            predictions.append(out)
    return summaries, predictions


class InStageFeed:
    """The driver's side of feeding ``data`` in-stage to a run's nodes (on the Spark ``backend``):
    the spread data the barrier stage runs over, the nodes' part (``spec``), and what the stage
    returned."""

    def __init__(self, data: Any, roles: list[tuple[str, int]], backend: Any, mode: str = "train", epochs: int = 1,
                 timeout: float = 600.0, keep: list[str] | None = None) -> None:
        from pyspark import RDD

        if mode not in ("train", "infer"):
            raise FeedError(f"mode must be 'train' or 'infer', got {mode!r}")
        if isinstance(data, RDD) and keep:
            raise FeedError("keep= names DataFrame columns; an RDD's predictions come one per row")
        self.data, self.roles = data, roles
        spec = instage_for(data, mode, epochs, timeout, keep)
        self.spread, dealt = spread(data, roles, backend)
        self.spec = replace(spec, dealt=dealt)
        self.summaries: list[dict] = []
        self.batches: list = []

    def describe(self) -> str:
        what = f"{self.spec.epochs} epoch(s)" if self.spec.mode == "train" else "inference"
        if isinstance(self.spread, Gathered):
            how = "whole partitions gathered to each node, no shuffle"
        elif self.spread is self.data:
            how = "one partition per node already, no shuffle"
        else:
            how = "rows dealt out by a shuffle"
        return (f"in-stage: each node's own task feeds it its partition ({what}; {how}; no extra task slot, "
                "later epochs replayed from a node-local spill)")

    def run_stage(self, backend, plan: NodePlan) -> None:
        """The barrier stage over the spread data (the body of each attempt's Spark job)."""
        with _stage_data(self.spread, backend) as data:
            outputs = backend.barrier_over(data, plan.fed, OUTPUT_DDL)
        self.summaries, self.batches = collect_outputs(self.spec.kind, outputs)

    def rows_per_node(self) -> dict[str, int]:
        names = {t: node_name(r, i) for t, (r, i) in enumerate(self.roles)}
        return {names[s["task"]]: sum(s["rows_per_epoch"]) for s in self.summaries}

    def epochs_fed(self) -> int:
        return min((len(s["rows_per_epoch"]) for s in self.summaries), default=0)

    def predictions(self) -> Any:
        """The nodes' predictions as a DataFrame (kept columns, then predictions) or an RDD (one
        value per row)."""
        if self.spec.kind == "rdd":
            return self.data.context.parallelize(self.batches, max(1, self.data.getNumPartitions()))
        if not self.batches:
            raise FeedError("the nodes returned no predictions: the DataFrame is empty")
        return arrow_frame(self.data.sparkSession, pa.Table.from_batches(self.batches))
