"""The barrier task of a node fed in-stage (see ``driver/feed/instage.py``): the node runs on a
thread while the task feeds it its partition (``feed/instage.py``).

Spark's worker imports this module as it unpickles the task; it imports nothing heavy. Where the
node's process is forked from this worker (``node/task/forked.py``), the task loads pyarrow and both
sides of the feed first and the process inherits them; where it is spawned, the process starts
first and they load in this task while it does.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ....wire.errors import FeedError
from ....wire.plan import FEED_SERVER_MODULE, FOREGROUND_ROLES
from ..task import run_started, start_node
from .localfeed import LocalFeed

if TYPE_CHECKING:
    from ....wire.plan import NodePlan

NODE_ERROR_WAIT = 10.0  # seconds a task whose feed broke waits for its node's own error
#: What a fed node's task and its process both import: this task's side of the feed, the process's
#: feed server (pyarrow, numpy).
FEED_MODULES = ("tfos_notebook.runtime.node.task.feed.instage", FEED_SERVER_MODULE)


def run_fed_node(plan: NodePlan, task: int, gpus: list[str], items: Iterator) -> Iterator:
    """A node whose barrier task also feeds it: the node runs on a thread while this task streams
    its partition; yields what the task returns (a summary, or the predictions)."""
    local = LocalFeed()
    outcome: dict[str, Any] = {}
    fed = plan.roles[task][0] in FOREGROUND_ROLES
    # on this thread, the task's only one, so that it may fork; this task's feed and the node's
    # feed server then load once, before the fork, else in each process at once
    started = start_node(plan, task, gpus, FEED_MODULES if fed else ())

    def node() -> None:
        try:
            outcome["summary"] = run_started(started, local)
        except BaseException as e:  # re-raised in the task below
            outcome["error"] = e
        finally:
            local.ended()

    thread = threading.Thread(target=node, name=f"tfos-node-{task}", daemon=True)
    thread.start()
    try:
        if fed:
            from .instage import feed_node, task_output  # pyarrow and the feed, if not loaded to fork

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
    except Exception:  # the task itself failed (not the node): the driver is told why, then Spark
        started.task_failed(traceback.format_exc(), NODE_ERROR_WAIT)
        thread.join(NODE_ERROR_WAIT)
        raise
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
