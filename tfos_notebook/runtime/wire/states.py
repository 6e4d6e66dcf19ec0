"""The states a node reports and the driver answers with (``NodeStateReport``, ``NodeAnswer``), as an
enum both ends read; which changes are legal is the driver's (``driver/run/lifecycle.py``)."""

from __future__ import annotations

from enum import Enum


class State(str, Enum):
    """A state that reads (and formats) as its value."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class NodeState(State):
    SCHEDULED = "scheduled"
    REGISTERED = "registered"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"

    @property
    def terminal(self) -> bool:
        return self in (NodeState.FINISHED, NodeState.FAILED, NodeState.STOPPED)

    @property
    def live(self) -> bool:
        """Registered and not ended: it holds a connection and may hold a process."""
        return self in (NodeState.REGISTERED, NodeState.RUNNING)
