"""A feeding task's question to the run's driver: what became of node ``task``? Asked over the
control channel (``NodeQuery`` / ``NodeAnswer``) when that node's data feed is gone, so that the
task fails with the node's own error rather than a closed connection."""

from __future__ import annotations

import logging

from ...host.timeouts import Deadline
from .. import channel
from .. import messages as m
from ..errors import ChannelError
from ..states import NodeState

log = logging.getLogger(__name__)


def ask_driver(driver: tuple[str, int] | None, secret: channel.Secret, task: int, wait: float = 10.0) -> str:
    """Why node ``task`` failed, as the run's driver tells (waiting up to ``wait`` seconds while the
    node is still live there: its failure may be on its way); "" if it did not, or cannot be asked."""
    if driver is None:
        return ""
    deadline = Deadline(wait)
    try:
        conn = channel.connect(driver[0], driver[1], secret, timeout=5)
    except (OSError, ChannelError) as e:  # the run's control server closed: the feed's own error stands
        log.warning("cannot ask the driver at %s:%s what became of node %s: %s", driver[0], driver[1], task, e)
        return ""
    try:
        answer = _query(conn, task)
        while _still_live(answer) and not deadline.expired:
            deadline.sleep(0.25)
            answer = _query(conn, task)
        return getattr(answer, "failure", "")
    except (OSError, ChannelError) as e:
        log.warning("the driver did not say what became of node %s: %s", task, e)
        return ""
    finally:
        conn.close()


def _query(conn: channel.Connection, task: int) -> m.Message:
    conn.send(m.encode(m.NodeQuery(task)))
    return m.decode(conn.recv())


def _still_live(answer: m.Message) -> bool:
    """The node is still live at the driver (its failure, if any, may be on its way)."""
    if not isinstance(answer, m.NodeAnswer) or answer.failure:
        return False
    try:
        return NodeState(answer.state).live
    except ValueError:  # "unknown": the driver has no such node
        return False
