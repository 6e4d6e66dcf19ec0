"""What a :class:`~.supervisor.Supervisor` is handed by the run it supervises (``launch.Run``),
so that ``supervisor.py`` need not import ``launch.py``, which imports it: the limits of its
attempts, and the feeder it passes the nodes' feed messages to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ...host.filetail import Chunk

if TYPE_CHECKING:
    from ...wire import messages as m
    from .noderecord import NodeRecord

FileSink = Callable[[str, list[Chunk]], dict[str, int]]


@dataclass
class AttemptLimits:
    """How long a run's attempts may take and how often they are made; the run's attributes of the
    same names are these (``Run.limits``), which its supervisor reads as each attempt goes."""

    reservation_timeout: float  # free slots, then every node registered
    retries: int  # relaunches after a lost node
    stop_grace_secs: float  # an ending attempt's job is cancelled this long (and a margin) after
    background_grace_secs: float = 0.0  # ps / evaluator nodes are stopped this long after the training nodes
    stall_secs: float = 3.0  # no registration for this long -> diagnose and show findings
    min_workers: int = 0  # a relaunch may shrink the training nodes to this many (0: never shrinks)
    replacement_grace: float = 60.0  # a relaunch waits this long for the slots of every node before it shrinks


class FeedHandler(Protocol):
    """Where the nodes' feed messages go (``feed.feeder.Feeder``)."""

    def on_message(self, node: NodeRecord, msg: m.Message) -> None: ...
