"""The feeding half of a run's API (InputMode.SPARK): ``train``, ``inference``, ``end_feed`` over
the network, ``predictions`` of a run fed in-stage. ``Run`` owns a :class:`RunFeeding`
(``run.feeding``) and answers these for it; the work is done by ``feed.feeder.Feeder`` (network)
and ``feed.instage.InStageFeed`` (in the gang's own stage)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from .feeder import Feeder
    from .instage import InStageFeed


class RunFeeding:
    """How the run named ``name`` is fed: over the network by ``feeder`` (None unless its
    ``input_mode`` is ``spark``), or in-stage by ``instage`` once :meth:`plan_in_stage` planned it.
    ``wait`` is the run's wait for its end."""

    def __init__(self, name: str, input_mode: str, feeder: Feeder | None, wait: Callable[[], Any]) -> None:
        self.name, self.input_mode, self.feeder, self._wait = name, input_mode, feeder, wait
        self.instage: InStageFeed | None = None

    def plan_in_stage(self, data: Any, roles: list[tuple[str, int]], predict: bool, epochs: int,
                      feed_timeout: float, keep: list[str] | None, backend: Any) -> InStageFeed:
        """Plan ``start(data)``'s in-stage feed on the Spark ``backend`` (raises ``ConfigError`` off
        ``input_mode="spark"``)."""
        if self.input_mode != "spark":
            raise ConfigError(f"run {self.name} reads its own data (input_mode={self.input_mode!r}): feeding "
                              "data needs Run(..., input_mode='spark')")
        from .instage import InStageFeed

        self.instage = InStageFeed(data, roles, backend, "infer" if predict else "train", epochs, feed_timeout, keep)
        return self.instage

    def _feeder(self) -> Feeder:
        if self.feeder is None:
            raise ConfigError(f"run {self.name} was started with input_mode={self.input_mode!r}; feeding Spark "
                              "data needs Run(..., input_mode='spark') (TFCluster.run(..., input_mode=InputMode.SPARK))")
        if self.instage is not None:
            raise ConfigError(f"run {self.name} is fed in-stage: its data was given to start(), and its nodes take "
                              "no other")
        return self.feeder
    def predictions(self) -> Any:
        """The predictions of a run started with ``start(data, predict=True)``, once it finished: a
        DataFrame (kept columns, then the prediction columns) or an RDD (one value per row).
        Raises the run's error if it failed."""
        if self.instage is None or self.instage.spec.mode != "infer":
            raise ConfigError(f"run {self.name} was not started with start(data, predict=True)")
        self._wait()
        return self.instage.predictions()

    def train(self, data: Any, num_epochs: int = 1, feed_timeout: float = 600.0, end_feed: bool = True):
        """Feed a Spark DataFrame or RDD to the training nodes ``num_epochs`` times; returns a
        ``FeedSummary`` once every row of every epoch is with the nodes.

        Partitions go round-robin to the chief and workers over the network (no task needs to run
        where its node runs, but the cluster needs a free task slot beside the nodes; data given to
        ``start(data)`` needs none). Each pass
        over ``ctx.dataset`` on a node is one epoch. The nodes' ``terminate()`` (or their function
        returning) ends feeding early without error.

        Args:
            data: a DataFrame (fed as Arrow batches) or an RDD (rows of tuples, Rows, dicts,
                numbers, strings or numpy arrays; the first row fixes the types).
            num_epochs: passes over ``data``; each runs one Spark job, so cache ``data`` if it is
                costly to compute.
            feed_timeout: seconds a node may leave fed data untouched before this fails.
            end_feed: after the last epoch, tell the nodes no more data will come
                (``DataFeed.should_stop()``); pass False to call ``train`` again.

        Raises:
            FeedTimeout: a node took no data for ``feed_timeout`` seconds.
            NodeError: a node failed while being fed (its traceback).
            FeedError: the data cannot be fed (no free slot, bad types...), with the fix.
        """
        return self._feeder().train(data, num_epochs, feed_timeout, end_feed)

    def inference(self, data: Any, feed_timeout: float = 600.0, schema: Any = None, keep: list[str] | None = None):
        """Predictions of the nodes for every row of ``data``, computed lazily by Spark.

        For an RDD, an RDD with one prediction per row, in order. For a DataFrame, a DataFrame
        of the ``keep`` columns (default: all) of each row next to its prediction columns; their
        types come from ``schema`` (DDL string or StructType) or, when omitted, from the nodes'
        answer for the first row (which they then see twice). The nodes answer with
        ``ctx.predict(fn)`` or ``DataFeed(ctx.mgr, train_mode=False)``; rows and answers travel on
        one connection, so each row gets exactly its own prediction. Call before the feed ends.
        """
        from .inference import inference

        return inference(self._feeder(), data, feed_timeout, schema, keep)

    def end_feed(self, timeout: float = 600.0) -> None:
        """Tell the nodes that no more data will come (``DataFeed.should_stop()`` turns true)."""
        self._feeder().end_feed(timeout)
