"""Heartbeats: telling a node whose host is cut off from a node that failed.

The supervisor pings every registered node each ``HEARTBEAT_SECS``; a node silent for
``NODE_SILENT_SECS`` (pongs included) is unreachable: a ``node_unreachable`` finding names it and
it is lost like any lost node (retried). A node's failure that comes while a peer has been silent
for ``SUSPECT_SECS`` is held back: when a host is cut off, its healthy peer's collective usually
times out first. The held failure stands once every peer answers (or the attempt's job ends), or
is blamed on the silent peer when that one is declared unreachable.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...wire import messages as m
from ...wire.plan import node_name
from ..errors import NodeError
from ..events.finding import Finding
from .coordinator import Coordinator
from .noderecord import NodeRecord

if TYPE_CHECKING:
    from ..diagnosis.watch import LiveDiagnosis

SUSPECT_SECS = 2 * m.HEARTBEAT_SECS + 1.0  # a node silent this long may have lost its host


class Heartbeat:
    """The pings of one run's attempts and the failure held back for a silent peer; ``fail`` ends
    the attempt with a failure (``Supervisor.abort``). ``lock`` is the run's: a failure is held
    under it (the coordinator's hook, on a connection thread), and :meth:`release` (the
    supervisor's thread) takes it to take the held failure off, so that it is handed on once."""

    def __init__(self, lock: threading.RLock, diagnosis: LiveDiagnosis, fail: Callable[[NodeError], None]) -> None:
        self.lock = lock
        self.diagnosis = diagnosis
        self.fail = fail
        self._pings = 0
        self._last_ping = 0.0
        self._held: NodeError | None = None

    def hold(self, error: NodeError, coord: Coordinator) -> bool:
        """Hold ``error`` back if a peer is silent (its host may be cut off and the failure only
        its consequence); whether it was held. Called with the run's lock held."""
        if self._held is not None or not coord.silent(SUSPECT_SECS):
            return False
        self._held = error
        return True

    def tick(self, coord: Coordinator, now: float, ending: bool) -> None:
        """Ping the nodes; a node silent for ``NODE_SILENT_SECS`` is unreachable (lost, retried); a
        failure held back for a silent peer is released once every peer answers. An ``ending``
        attempt only pings (unless a failure is held)."""
        if now - self._last_ping >= m.HEARTBEAT_SECS:
            self._pings += 1
            self._last_ping = now
            coord.broadcast(m.Ping(self._pings))
        if ending and self._held is None:
            return
        lost = coord.silent(m.NODE_SILENT_SECS)
        if lost:
            self._unreachable(coord, lost[0])
        elif self._held is not None and not coord.silent(SUSPECT_SECS):
            self.release()

    def _unreachable(self, coord: Coordinator, node: NodeRecord) -> None:
        with self.lock:  # ``hold`` sets it from a connection's thread
            held, self._held = self._held, None
        evidence = [f"no message (heartbeat answers included) for {time.monotonic() - node.heard:.0f}s; the "
                    f"driver pings every {m.HEARTBEAT_SECS:g}s"]
        if held is not None:
            evidence.append(f"{node_name(held.role, held.index)} failed meanwhile, most likely because of it: "
                            f"{(held.traceback_text.strip().splitlines() or ['?'])[-1]}")
        self.diagnosis.publish([Finding(
            code="node_unreachable",
            cause=f"{node.name} on {node.where} stopped answering: its host is unreachable (network) or frozen",
            evidence=tuple(evidence),
            remedy="nothing, if the network failure passes: the run is relaunched while retries are left; otherwise "
                   f"check the network and the executor of {node.where}",
        )])
        coord.unreachable(node, m.NODE_SILENT_SECS)

    def release(self) -> None:
        """The held failure stands on its own (every peer answered, or the attempt's job ended)."""
        with self.lock:
            held, self._held = self._held, None
        if held is not None:
            self.fail(held)
