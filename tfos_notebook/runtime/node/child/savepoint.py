"""The decommission checkpoint inside a node's child process: where the training loop stops to save.

When an executor of the run starts decommissioning, the driver tells every node ``SaveSoon``. The
training loop calls :meth:`SavePoint.boundary` after each step (``ctx.callbacks()`` does for Keras,
``ctx.step_boundary`` for a custom loop). The first boundary after the notice sends ``AtBoundary``
with its step and holds the loop until the driver answers: the driver picks that step + 1 as the
step to save at (``SaveAt``), every node's order thread acknowledges it (``SaveAtSeen``), and only
then are the held loops let go (``SaveGo``). Under MultiWorkerMirroredStrategy the workers are at
most one step apart, and none can finish the step after a held worker's without it, so every worker
learns the step before it can pass it: all of them save at the end of the same step, as the save's
collectives need (TensorFlow's ``PreemptionCheckpointHandler`` agrees on its step the same way,
through its coordination service). After its save a node sends ``Saved`` and its function ends
(``Preempted``): the child reports itself stopped and leaves at once, its own files flushed
(``child._leave_saved``); once every training node saved, the driver ends the attempt and relaunches
the run from the checkpoint. (A node's process that the driver stopped instead would meet
TensorFlow's own SIGTERM handler, which a multi-worker strategy installs, and be killed only after
the stop's grace.)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ...wire.messages import AtBoundary, Message, SaveAtSeen, Saved

log = logging.getLogger(__name__)

GO_WAIT_SECS = 30.0  # a loop held at its boundary goes on unsaved if the driver has not let it go by then


class Preempted(BaseException):
    """The node saved its decommission checkpoint: its function ends here, rather than train
    past the checkpoint (a BaseException: the function's own ``except Exception`` lets it pass)."""


class SavePoint:
    """This node's side of the decommission checkpoint; ``emit`` sends a message to the driver."""

    def __init__(self, emit: Callable[[Message], None]) -> None:
        self.emit = emit
        self.noticed = threading.Event()
        self.go = threading.Event()
        self.target: int | None = None
        self.reported = False
        self.saved_at: int | None = None

    # -- the order thread ----------------------------------------------------------------------
    def order(self, order: dict) -> None:
        kind = order["kind"]
        if kind == "save_soon":
            self.noticed.set()
        elif kind == "save_at":
            self.target = int(order["step"])  # before the acknowledgement: see the module's docstring
            self.noticed.set()
            self.emit(SaveAtSeen(self.target))
        elif kind == "save_go":
            self.go.set()

    # -- the training loop ---------------------------------------------------------------------
    def boundary(self, step: int, save: Callable[[], str | None]) -> None:
        """Step ``step`` just ended: save with ``save()`` (returning where, or None) and end the
        function (``Preempted``) when this is the agreed step; hold for the agreement at the first
        boundary after a notice; otherwise return at once (one event read)."""
        if not self.noticed.is_set() or self.saved_at is not None:
            return
        if self.target is None and not self.reported:
            self.reported = True
            self.emit(AtBoundary(int(step)))
            if not self.go.wait(GO_WAIT_SECS):
                log.warning("the driver did not agree on a checkpoint step within %.0fs: training goes on",
                            GO_WAIT_SECS)
                return
        target = self.target
        if target is None or step < target:
            return
        path = save()
        self.saved_at = int(step)
        self.emit(Saved(int(step), path or ""))
        log.info("decommission checkpoint saved at step %d%s", step, f" in {path}" if path else "")
        raise Preempted(f"saved the decommission checkpoint at step {step}")
