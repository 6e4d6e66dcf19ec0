"""The barrier task of a node fed in-stage (see ``driver/feed/instage.py``): the node runs on a
thread while the task feeds it its partition (``instage_task``).

Spark's worker imports this module as it unpickles the task; it imports nothing heavy, so that the
node's process starts first and pyarrow and the feed's code load in this task while it does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...wire.errors import FeedError
from ...wire.plan import FOREGROUND_ROLES
from ..task import run_node
from .localfeed import LocalFeed

if TYPE_CHECKING:
    from ...wire.plan import NodePlan

NODE_ERROR_WAIT = 10.0  # seconds a task whose feed broke waits for its node's own error


def run_fed_node(plan: NodePlan, task: int, gpus: list[str], items: Iterator) -> Iterator:
    """A node whose barrier task also feeds it: the node runs on a thread while this task streams
    its partition; yields what the task returns (a summary, or the predictions)."""
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
    thread.start()  # the node's process starts first
    try:
        if plan.roles[task][0] in FOREGROUND_ROLES:
            from .instage_task import feed_node, task_output  # pyarrow and the feed: loaded while it starts

            spec = plan.instage
            for out in feed_node(spec, plan.secret, plan.run_id, task, items, local,
                                 plan.feed_buffer_bytes or 64 << 20):
                yield from task_output(spec.kind, task, out)
    except FeedError:
        # The feed broke, most often because the node's function failed: its own error, which
        # the node's thread has in moments, says why; failing the task first would lose it.
        thread.join(NODE_ERROR_WAIT)
        if "error" in outcome:
            raise outcome["error"] from None
        raise
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
