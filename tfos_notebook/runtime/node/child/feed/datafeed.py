"""What a node's function reads fed data with (InputMode.SPARK).

- ``ctx.dataset(batch_size, ...)``: a ``tf.data.Dataset``; each pass over it is one epoch of
  ``train(data, num_epochs=N)``, so ``model.fit(ctx.dataset(64), epochs=N)`` sees every fed row
  once per epoch.
- ``ctx.predict(fn, batch_size)``: answers ``inference(data)``: calls ``fn`` on each batch and
  sends its output back, one result per row, to the task that sent the rows.
- :class:`DataFeed`: TensorFlowOnSpark's consumer (``next_batch``, ``should_stop``,
  ``batch_results``, ``terminate``), so TFoS programs run unchanged.

Workers in step under MultiWorkerMirroredStrategy: partitions go to the training nodes round-robin,
so nodes may get different numbers of rows. The dataset returned here has auto-sharding off (the
feed already splits the data) and an unknown length, and TensorFlow's distributed iterator then
keeps the workers in step by itself: at every step the workers agree (with an all-reduce) whether
any still has data, and those that ran out take an empty batch until all have, so no collective
waits for a worker that has left. Keras's ``fit`` and ``strategy.experimental_distribute_dataset``
loops get this; a hand-written loop over ``DataFeed.next_batch`` does not, and must make every
worker run the same number of steps itself. Under the strategy ``batch_size`` is the global batch:
each worker takes ``batch_size / num_workers`` rows per step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ....wire.errors import FeedError
from ....wire.feed.buffers import numpy_dtype
from ....wire.feed.codec import batch_to_rows, column_to_numpy, is_list_type, python_column
from ....wire.feed.predictions import results_to_batch
from .queue import Piece


def feed_of(obj: Any):
    """The node's data feed, given ``ctx``, ``ctx.mgr`` or the feed itself."""
    from .server import FeedServer

    for candidate in (obj, getattr(obj, "mgr", None)):
        if isinstance(candidate, FeedServer):
            return candidate
    raise FeedError("this node has no data feed: start the cluster with input_mode=InputMode.SPARK "
                    "(Run(..., input_mode='spark')); only chief and worker nodes are fed, not ps or evaluator")


def arrays_of(pieces: Sequence[Piece], names: Sequence[str]) -> dict[str, np.ndarray]:
    """Columns ``names`` of the rows in ``pieces`` as numpy arrays (views when one piece)."""
    out = {}
    for name in names:
        parts = [p.chunk.array(name)[p.start:p.stop] for p in pieces]
        if len(parts) == 1:
            out[name] = parts[0]
        else:
            try:
                out[name] = np.concatenate(parts)
            except ValueError as e:
                raise FeedError(f"column {name!r} changes shape between rows ({e}): tensors need equal shapes, "
                                "so pad or trim them in Spark") from e
    return out


def _select(names: Sequence[str], features: str | Sequence[str] | None, label: str | None):
    for name in ([label] if label else []) + ([features] if isinstance(features, str) else list(features or [])):
        if name not in names:
            raise FeedError(f"the fed data has no column {name!r}; it has {list(names)}")
    if isinstance(features, str):
        return [features], True
    chosen = list(features) if features is not None else [n for n in names if n != label]
    return chosen, features is None and len(chosen) == 1


def _spec(tf, name: str, field: pa.Field, sample: pa.RecordBatch | None):
    depth, t = 0, field.type
    while is_list_type(t):
        depth, t = depth + 1, t.value_type
    if sample is not None and sample.num_rows:
        arr = column_to_numpy(sample.column(sample.schema.get_field_index(name)), name)
        dims: list[int | None] = list(arr.shape[1:])
        dtype = tf.string if arr.dtype == object else tf.as_dtype(arr.dtype)
    else:
        dims = [None] * depth
        dtype = tf.string if (pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t)
                              or pa.types.is_large_binary(t)) else tf.as_dtype(numpy_dtype(t))
    return tf.TensorSpec([None, *dims], dtype, name=name)


def make_dataset(feed, batch_size: int, features: str | Sequence[str] | None = None, label: str | None = None,
                 by_epoch: bool = True, drop_remainder: bool = False, prefetch: int = 2):
    """The ``tf.data.Dataset`` of ``ctx.dataset`` (see :meth:`NodeContext.dataset`)."""
    if batch_size < 1:
        raise FeedError(f"batch_size must be at least 1, got {batch_size}")
    schema, sample = feed.sample()
    if not schema.names:
        raise FeedError("this node has no row to take the data's types from (the RDD, or this node's partition "
                        "of it, is empty): give every node rows (rdd.repartition), or read them with DataFeed")
    import tensorflow as tf

    chosen, single = _select(schema.names, features, label)
    wanted = chosen + ([label] if label else [])

    def structure(values: dict) -> Any:
        x = values[chosen[0]] if single else {n: values[n] for n in chosen}
        return (x, values[label]) if label else x

    signature = structure({n: _spec(tf, n, schema.field(n), sample) for n in wanted})

    def batches():
        while True:
            pieces, why = feed.take(batch_size, epoch=by_epoch)
            rows = sum(p.rows for p in pieces)
            if rows and (rows == batch_size or not drop_remainder):
                yield structure(arrays_of(pieces, wanted))
            if why != "full":
                return

    ds = tf.data.Dataset.from_generator(batches, output_signature=signature)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    ds = ds.with_options(options)
    return ds.prefetch(prefetch) if prefetch else ds


def predict(feed, fn: Callable[[Any], Any], batch_size: int = 256,
            features: str | Sequence[str] | None = None) -> int:
    """The loop of ``ctx.predict`` (see :meth:`NodeContext.predict`); returns the rows answered."""
    total = 0
    while True:
        pieces, why = feed.take(batch_size, partition=True)
        rows = sum(p.rows for p in pieces)
        if rows:
            chosen, single = _select(pieces[0].chunk.batch.schema.names, features, None)
            values = arrays_of(pieces, chosen)
            x = values[chosen[0]] if single else values
            feed.send_results(results_to_batch(fn(x), rows))
            total += rows
        if why in ("end", "terminated"):
            return total


class DataFeed:
    """TensorFlowOnSpark's ``TFNode.DataFeed`` over this node's data feed.

    Args:
        mgr: ``ctx.mgr`` (or ``ctx``); or, to run a function off the cluster, a manager from
            ``TFManager.start`` whose ``input`` queue holds the rows, then None.
        train_mode: False when the rows come from ``inference``: a batch then ends with its
            partition, and each row's result must be given to ``batch_results`` in order.
        qname_in, qname_out: the manager's queues; a node has one data feed, whatever their names.
        input_mapping: ``{column: tensor_name}``; ``next_batch`` then returns
            ``{tensor_name: [values]}`` instead of a list of rows.
    """

    def __init__(self, mgr: Any, train_mode: bool = True, qname_in: str = "input", qname_out: str = "output",
                 input_mapping: dict[str, str] | None = None) -> None:
        self.queues = mgr if hasattr(mgr, "get_queue") else None
        self.feed = None if self.queues is not None else feed_of(mgr)
        self.train_mode = train_mode
        self.qname_in, self.qname_out = qname_in, qname_out
        self.input_mapping = dict(input_mapping) if input_mapping else None
        self.done_feeding = False

    def next_batch(self, batch_size: int) -> list | dict[str, list]:
        """Up to ``batch_size`` rows: fewer when the feed ended (or, in inference, the partition).
        Rows come back as they were fed: tuples for an RDD of tuples, pyspark Rows for a DataFrame,
        numpy values as numpy values."""
        if self.queues is not None:
            return self._mapped(self._queued_rows(batch_size))
        pieces, why = self.feed.take(batch_size, partition=not self.train_mode)
        if why in ("end", "terminated"):
            self.done_feeding = True
        batches = [p.chunk.batch.slice(p.start, p.rows) for p in pieces]
        if self.input_mapping is None or not all(
                col in b.schema.names for b in batches for col in self.input_mapping):
            return self._mapped([row for b in batches for row in batch_to_rows(b)])
        tensors: dict[str, list] = {t: [] for t in self.input_mapping.values()}
        for batch in batches:  # named columns: taken by name, column by column
            for col, tensor in self.input_mapping.items():
                i = batch.schema.get_field_index(col)
                tensors[tensor] += python_column(batch.column(i), batch.schema.field(i))
        return tensors

    def _mapped(self, rows: list) -> list | dict[str, list]:
        """``rows`` as they are, or with ``input_mapping`` one list per tensor: the i-th value of
        each row goes to the i-th tensor in the sorted order of the mapping's columns, as
        TensorFlowOnSpark does."""
        if self.input_mapping is None:
            return rows
        tensors = [tensor for _, tensor in sorted(self.input_mapping.items())]
        return {tensor: [row[i] for row in rows] for i, tensor in enumerate(tensors)}

    def _queued_rows(self, batch_size: int) -> list:
        queue_in = self.queues.get_queue(self.qname_in)
        rows: list = []
        while len(rows) < batch_size:
            item = queue_in.get()
            queue_in.task_done()
            if item is None:  # the end of the feed
                self.done_feeding = True
                break
            rows.append(item)
        return rows

    def should_stop(self) -> bool:
        """True once the feed ended (the driver closed it) or ``terminate`` was called."""
        return self.done_feeding

    def batch_results(self, results: Any) -> None:
        """Send one result per row of the batches read (in order) back to ``inference``; the
        driver gets each result as the object given here (numpy arrays and scalars, tuples...)."""
        if self.queues is not None:
            queue_out = self.queues.get_queue(self.qname_out)
            for item in results:
                queue_out.put(item)
            return
        self.feed.send_results(results_to_batch(results))

    def terminate(self) -> None:
        """Stop feeding early: buffered rows are dropped, the remaining feeding tasks skip their
        data, and ``train`` on the driver returns. ``should_stop`` is then true."""
        if self.queues is not None:
            queue_in = self.queues.get_queue(self.qname_in)
            while not queue_in.empty():
                queue_in.get_nowait()
                queue_in.task_done()
        else:
            self.feed.terminate()
        self.done_feeding = True
