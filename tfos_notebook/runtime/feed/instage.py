"""In-stage feeding: the data is fed inside the gang's own barrier stage.

When the data is known as the nodes start (``Run.start(data=...)``, ``%%tfos_train --data``, a
TensorFlowOnSpark program on a cluster with no spare slot), the driver spreads it over one
partition per node: a training node's partition holds its share of the rows, a ps or evaluator
node's partition is empty. The barrier stage runs over that data, so each node's own task holds
its partition and streams it to its TensorFlow process on the same host (the node's data feed,
over loopback). No extra task slot is needed, which is what a cluster with exactly one slot per
node, or one where every task needs a GPU, requires; and the data stays where Spark computed it.

Epochs: the first pass reads the partition from Spark and, when there are more epochs, writes it
to a node-local Arrow spill file as it goes; later passes replay the spill (deleted at the end),
so Spark computes the data once per attempt. Each pass is one epoch of ``ctx.dataset`` /
``DataFeed``; after the last, the feed ends (``should_stop()``).

Inference: the node's task sends its rows and reads the predictions back on the same connection;
they leave the barrier stage as the task's output (Arrow IPC bytes per batch for a DataFrame, one
value per row for an RDD) and reach the driver, which makes them a DataFrame / RDD again.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..ctx import FOREGROUND_ROLES
from ..errors import FeedError
from .codec import batch_bytes, batches_of_rows, result_values
from .protocol import tell
from .tasks import TASK_TIMEOUT_MARGIN, InferFeed, TrainFeed

#: The column that carries a DataFrame row's destination through the shuffle (dropped after).
FEED_KEY = "_tfos_feed_key"
#: What a DataFrame's barrier tasks return: one row per summary (train) or result batch (infer).
OUTPUT_DDL = "task int, payload binary"
HASH_SEED = 42  # Spark's seed for hash partitioning (Murmur3Hash in HashPartitioning)


@dataclass(frozen=True)
class InStage:
    """What the nodes need to feed themselves; travels in ``NodePlan``.

    ``mode``: ``train`` or ``infer``; ``kind``: ``df`` (Arrow batches) or ``rdd`` (rows, made
    batches with ``rdd_schema``); ``sample``: one row (or the schema) for ``ctx.dataset``'s types;
    ``timeout``: seconds a node may take no data before its task gives up."""

    mode: str
    kind: str
    epochs: int
    sample: bytes
    rdd_schema: bytes | None = None
    keep: tuple[str, ...] = ()
    timeout: float = 600.0


# -- driver side ---------------------------------------------------------------------------------

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


def spread(data: Any, roles: list[tuple[str, int]]) -> Any:
    """``data`` repartitioned into one partition per node, the rows dealt round-robin to the
    training nodes (chief, workers) and none to ps / evaluator nodes.

    A DataFrame keeps its columns plus ``FEED_KEY`` (the node tasks drop it); an RDD keeps its rows."""
    from pyspark import RDD

    n = len(roles)
    trainers = [t for t, (role, _) in enumerate(roles) if role in FOREGROUND_ROLES]
    if isinstance(data, RDD):
        return data.mapPartitionsWithIndex(_Deal(trainers)).partitionBy(n, _identity).values()
    from pyspark.sql import functions as F

    keys = F.array(*[F.lit(k) for k in partition_keys(n, trainers)])
    deal = F.element_at(keys, (F.monotonically_increasing_id() % len(trainers)).cast("int") + 1)
    return data.withColumn(FEED_KEY, deal).repartition(n, FEED_KEY)


def _identity(key: int) -> int:
    return key


@dataclass(frozen=True)
class _Deal:
    """Gives an RDD's rows round-robin to the training tasks (as ``(task, row)`` pairs)."""

    trainers: list[int]

    def __call__(self, index: int, rows: Iterator) -> Iterator[tuple[int, Any]]:
        k = len(self.trainers)
        for i, row in enumerate(rows):
            yield self.trainers[(index + i) % k], row


def instage_for(data: Any, mode: str, epochs: int, timeout: float, keep: list[str] | None = None) -> InStage:
    """The nodes' half of feeding ``data`` in-stage (reads one row on the driver for the sample)."""
    from .feeder import DataSample

    if epochs < 1:
        raise FeedError(f"epochs must be at least 1, got {epochs}")
    sample = DataSample.of(data)
    return InStage(mode=mode, kind=sample.kind, epochs=epochs, sample=sample.sample_bytes(),
                   rdd_schema=sample.rdd_schema, keep=tuple(keep or ()), timeout=timeout)


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


# -- node side -----------------------------------------------------------------------------------

class LocalFeed:
    """Where this node's own data feed listens, once its process serves it (None if it never does)."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self.address: tuple[str, int] | None = None

    def serving(self, host: str, port: int) -> None:
        self.address = (host, port)
        self._ready.set()

    def ended(self) -> None:
        self._ready.set()

    def wait(self) -> tuple[str, int] | None:
        self._ready.wait()
        return self.address


class _Spill:
    """The partition's batches on this node's disk, for the epochs after the first."""

    def __init__(self, run_id: str, task: int) -> None:
        self.dir = tempfile.mkdtemp(prefix=f"tfos-{run_id}-{task}-spill-")
        self.path = os.path.join(self.dir, "partition.arrows")
        self._writer: pa.ipc.RecordBatchStreamWriter | None = None

    def tee(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if self._writer is None:
                self._writer = pa.ipc.new_stream(self.path, batch.schema)
            self._writer.write_batch(batch)
            yield batch
        if self._writer is not None:
            self._writer.close()

    def replay(self) -> Iterator[pa.RecordBatch]:
        if self._writer is None:
            return iter(())
        return iter(pa.ipc.open_stream(pa.OSFile(self.path)))

    def delete(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _batches(spec: InStage, items: Iterator) -> Iterator[pa.RecordBatch]:
    if spec.kind == "rdd":
        from .protocol import FRAME_BYTES

        return batches_of_rows(items, pa.ipc.read_schema(pa.py_buffer(spec.rdd_schema)), FRAME_BYTES)
    return (b.drop_columns([FEED_KEY]) if FEED_KEY in b.schema.names else b for b in items)


def feed_node(spec: InStage, secret: bytes, run_id: str, task: int, items: Iterator,
              local: LocalFeed) -> Iterator:
    """Stream this task's partition to its own node: every epoch (training), or once with the
    predictions yielded as they come (inference). Returns at once when the node never served a
    feed (it failed or was stopped: the run's error says why)."""
    address = local.wait()
    if address is None:
        return
    timeout = spec.timeout + TASK_TIMEOUT_MARGIN
    tell(address, secret, {"t": "sample", "pass": "in-stage", "data": spec.sample})
    if spec.mode == "infer":
        infer = InferFeed(secret, [address], timeout, keep=list(spec.keep))
        for kept, results in infer.run(task, 0, _batches(spec, items)):
            out = results if kept is None or not kept.num_columns else _join(kept, results)
            yield result_values(out) if spec.kind == "rdd" else batch_bytes(out).to_pybytes()
        tell(address, secret, {"t": "end"})
        return
    spill = _Spill(run_id, task) if spec.epochs > 1 else None
    fed: list[int] = []
    try:
        for epoch in range(spec.epochs):
            source = _batches(spec, items) if epoch == 0 else spill.replay()
            if spill is not None and epoch == 0:
                source = spill.tee(source)
            pass_id = f"in-stage.{epoch}"
            record = TrainFeed(secret, [address], pass_id, timeout).feed(task, 0, source)
            fed.append(record["rows"] + record["skipped"])
            if record["status"] == "timeout":
                raise FeedError(f"node task {task} took no data for {spec.timeout:.0f}s: its function is not "
                                "reading the feed (ctx.dataset / DataFeed.next_batch) or is stuck")
            if record["status"] != "fed":  # terminated, or the node is gone: nobody wants more
                break
            tell(address, secret, {"t": "epoch_end", "pass": pass_id})
        tell(address, secret, {"t": "end"})
    except OSError:  # the node's process ended while being fed: its own result says how
        pass
    finally:
        if spill is not None:
            spill.delete()
    yield {"_tfos_summary": True, "task": task, "rows_per_epoch": fed}


def _join(kept: pa.RecordBatch, results: pa.RecordBatch) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([*kept.columns, *results.columns],
                                      names=[*kept.schema.names, *results.schema.names])


def run_fed_node(plan, task: int, gpus: list[str], items: Iterator) -> Iterator:
    """A node whose barrier task also feeds it: the node runs on a thread while this task streams
    its partition; yields what the task returns (a summary, or the predictions)."""
    from ..node import run_node

    spec: InStage = plan.instage
    local = LocalFeed()
    outcome: dict[str, Any] = {}

    def node() -> None:
        try:
            outcome["summary"] = run_node(plan, task, gpus, local)
        except BaseException as e:  # re-raised in the task below
            outcome["error"] = e
        finally:
            local.ended()

    thread = threading.Thread(target=node, name=f"tfos-node-{task}", daemon=True)
    thread.start()
    if plan.roles[task][0] in FOREGROUND_ROLES:
        for out in feed_node(spec, plan.secret, plan.run_id, task, items, local):
            yield from _task_output(spec.kind, task, out)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]


OUTPUT_SCHEMA = pa.schema([("task", pa.int32()), ("payload", pa.binary())])


def _task_output(kind: str, task: int, out: Any) -> Iterator:
    """What the barrier task returns for ``out``: an RDD's task returns Python objects (the
    summary dict, or one prediction per row); a DataFrame's, ``OUTPUT_SCHEMA`` batches."""
    if kind == "rdd":
        yield from (out if isinstance(out, list) else [out])
        return
    payload = json.dumps(out).encode() if isinstance(out, dict) else out
    yield pa.RecordBatch.from_pylist([{"task": task, "payload": payload}], schema=OUTPUT_SCHEMA)


class InStageFeed:
    """The driver's side of feeding ``data`` in-stage to a run's nodes: the spread data the barrier
    stage runs over, the nodes' part (``spec``), and what the stage returned."""

    def __init__(self, data: Any, roles: list[tuple[str, int]], mode: str = "train", epochs: int = 1,
                 timeout: float = 600.0, keep: list[str] | None = None) -> None:
        from pyspark import RDD

        if mode not in ("train", "infer"):
            raise FeedError(f"mode must be 'train' or 'infer', got {mode!r}")
        if isinstance(data, RDD) and keep:
            raise FeedError("keep= names DataFrame columns; an RDD's predictions come one per row")
        self.data, self.roles = data, roles
        self.spec = instage_for(data, mode, epochs, timeout, keep)
        self.spread = spread(data, roles)
        self.summaries: list[dict] = []
        self.batches: list = []

    def describe(self) -> str:
        what = f"{self.spec.epochs} epoch(s)" if self.spec.mode == "train" else "inference"
        return (f"in-stage: each node's own task feeds it its partition ({what}; no extra task slot, "
                "later epochs replayed from a node-local spill)")

    def run_stage(self, backend, plan) -> None:
        """The barrier stage over the spread data (the body of each attempt's Spark job)."""
        outputs = backend.barrier_over(self.spread, plan.fed, OUTPUT_DDL)
        self.summaries, self.batches = collect_outputs(self.spec.kind, outputs)

    def rows_per_node(self) -> dict[str, int]:
        names = {t: f"{r}:{i}" for t, (r, i) in enumerate(self.roles)}
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
        return self.data.sparkSession.createDataFrame(pa.Table.from_batches(self.batches))
