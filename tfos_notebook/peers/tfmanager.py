"""``TFManager`` with TensorFlowOnSpark's names, for running a node's function off the cluster
(a unit test, a debugger): ``start`` makes a manager in this process whose ``input`` queue holds
the rows ``TFNode.DataFeed(mgr)`` reads (None ends the feed) and whose ``output`` queue receives
``batch_results``.

    mgr = TFManager.start(b"key", ["input", "output"])
    for row in rows:
        mgr.get_queue("input").put(row)
    mgr.get_queue("input").put(None)
    main_fun(args, ctx)          # a ctx whose .mgr is mgr

On the cluster each node's ``ctx.mgr`` is its data feed, filled by ``TFCluster.train`` over the
run's authenticated channel: TensorFlowOnSpark's managers reachable over the network
(``mode="remote"``, ``connect``) are its feeding plumbing and are not provided.
"""

from __future__ import annotations

import queue
from typing import Any

from ..errors import ConfigError

__all__ = ["TFManager", "connect", "start"]


class TFManager:
    """Named queues (``get_queue``; None for an unknown name) and a key-value store (``get``,
    ``set``) in this process."""

    def __init__(self, queues: list[str]) -> None:
        self._queues = {name: queue.Queue() for name in queues}
        self._values: dict[str, Any] = {}

    def get_queue(self, qname: str) -> queue.Queue | None:
        return self._queues.get(qname)

    def get(self, key: str) -> Any:
        return self._values[key]

    def set(self, key: str, value: Any) -> None:
        self._values[key] = value


def start(authkey: bytes, queues: list[str], mode: str = "local") -> TFManager:
    """A manager with the named ``queues`` in this process (``authkey`` is accepted for
    TensorFlowOnSpark's signature; nothing is reachable from outside).

    Raises:
        ConfigError: ``mode`` is not ``"local"``.
    """
    if mode != "local":
        raise ConfigError(f"TFManager.start(mode={mode!r}): only mode='local' (a manager in this process, to run "
                          "a function off the cluster) is provided; on the cluster ctx.mgr is already each node's "
                          "data feed")
    return TFManager(queues)


def connect(address: Any, authkey: bytes) -> TFManager:
    """TensorFlowOnSpark's connection to a node's manager over the network: refused.

    Raises:
        ConfigError: always; nodes are fed with ``TFCluster.train`` / ``inference``.
    """
    raise ConfigError("TFManager.connect: nodes' data feeds are reached only by TFCluster.train / inference over "
                      "the run's authenticated channel; use ctx.mgr inside the node's function")
