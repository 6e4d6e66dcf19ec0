"""What the driver knows of one node of an attempt (:class:`NodeRecord`), and the two sides a
:class:`~.coordinator.Coordinator` talks to: the nodes' connections (:class:`Conn`) and its run
(:class:`Hooks`, the supervisor)."""

from __future__ import annotations

from typing import Any, Protocol

from ...host.filetail import Chunk
from ...wire import messages as m
from ...wire.plan import node_name
from ...wire.states import NodeState
from ..errors import NodeError
from ..events.finding import Finding


class Conn(Protocol):
    """What the coordinator needs of a connection (``channel.Connection`` or a test's fake)."""

    attrs: dict[str, Any]

    def send(self, msg: dict) -> None: ...

    def close(self) -> None: ...


class Hooks(Protocol):
    """The run's side of the coordinator; called with the run's lock held."""

    def cluster_ready(self, spec: dict[str, list[str]]) -> bool:
        """Every node registered: whether the run goes on to running (False: it is ending)."""

    def node_failed(self, error: NodeError, retryable: bool) -> None:
        """A node failed (``retryable``: it was lost or killed, not an exception of the function)."""

    def ending(self) -> bool:
        """Whether the attempt is winding down (a lost connection is then expected)."""

    def foreground_done(self) -> None:
        """Every chief and worker finished."""

    def findings(self, findings: list[Finding]) -> None: ...

    def leftovers(self, items: tuple[dict, ...]) -> None: ...

    def versions(self, node: NodeRecord, python: str, tensorflow: str) -> None:
        """The Python and TensorFlow versions a node registered with."""

    def files(self, node_dir: str, chunks: list[Chunk]) -> dict[str, int] | None:
        """Shipped event-file bytes; returns ``{relpath: offset}`` of bytes to send again."""

    def feed(self, node: NodeRecord, msg: m.Message) -> None: ...

    def savepoint(self, node: NodeRecord, msg: m.Message) -> None:
        """A message of the decommission checkpoint (``AtBoundary``, ``SaveAtSeen``, ``Saved``);
        called without the run's lock."""

    def model_dir_unseen(self, nodes: list[str]) -> None:
        """These nodes (``worker:1 on host (address)``) do not see the run's local model dir."""


class NodeRecord:
    """The driver's record of one task of one attempt."""

    def __init__(self, task: int, role: str, index: int) -> None:
        self.task, self.role, self.index = task, role, index
        self.conn: Conn | None = None
        self.host, self.port, self.executor_id, self.hostname = "", 0, "", ""
        self.state = NodeState.SCHEDULED
        self.returned = False
        self.value: Any = None
        self.sees_model_dir = True
        self.heard = 0.0  # time.monotonic() of its last message
        self.failure = ""  # why it failed, in a line or a few (for the tasks that feed it)

    @property
    def name(self) -> str:
        return node_name(self.role, self.index)

    @property
    def where(self) -> str:
        """Its host by name and address (hosts may share a name): ``worker-3 (10.0.0.7)``."""
        return f"{self.hostname} ({self.host})" if self.hostname and self.hostname != self.host else self.host
