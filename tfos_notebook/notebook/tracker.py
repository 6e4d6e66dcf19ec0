"""Keeps a run's record in the runs registry (``state/registry.py``) current from the run's
events, and carries out the stop requests other processes leave for it."""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import psutil

from ..runtime.driver.diagnosis.insight import PaceBoard, Progress
from ..runtime.driver.events import (
    AttemptEnded,
    CheckpointSaved,
    Decommissioning,
    Event,
    FindingRaised,
    LaunchSubmitted,
    MlflowRun,
    ModelDirUnshared,
    Pace,
    RunFinished,
    RunStateChanged,
    Step,
)
from ..runtime.wire.plan import node_name
from ..state import registry
from ..state.registry import RunRecord
from .view import attempt_line

if TYPE_CHECKING:
    from ..tensorboard import TensorBoardHandle
    from ..tracking.run import TrackedRun

log = logging.getLogger(__name__)

STOP_POLL_SECS = 0.5
STEP_WRITE_SECS = 1.0  # step/loss changes are written at most this often


class RunTracker:
    """Keeps a run's record current from its events and carries out stop requests for it.

    Made by :func:`track`; ``stop()`` ends the tracking (it also ends with the run).
    """

    def __init__(self, run: TrackedRun, on_stop: Callable[[], None] | None = None, parent: str | None = None) -> None:
        self.run = run
        self._on_stop = on_stop or run.stop
        self._lock = threading.Lock()
        self._last_step_write = 0.0
        self._curve_of: int | None = None
        self._paces = PaceBoard()
        self._done = threading.Event()
        self._waiting_for = {"run", "mlflow"}  # the record is complete once both are
        self.record = owned_record(
            run_id=run.run_id, name=run.name, state=str(run.state) if run.state != "new" else "reserving",
            num_nodes=len(run.roles), roles=tuple(node_name(r, i) for r, i in run.roles),
            input_mode=run.input_mode, model_dir=run.model_dir, log_dir=run.log_dir, parent=parent)
        registry.write_record(self.record)
        registry.prune()
        self._unsubscribe = run.events.subscribe(self._on_event)
        self._watcher = threading.Thread(target=self._watch_stop_requests, daemon=True,
                                         name=f"tfos-registry-{run.run_id}")
        self._watcher.start()

    def set_tensorboard(self, board: TensorBoardHandle | None) -> None:
        """Record the run's TensorBoard (None: it stopped)."""
        if board is None:
            self._update(tensorboard_port=None, tensorboard_url=None)
        else:
            root = board.mirror.root
            self._update(mirror_dir=root, eval_dir=os.path.join(root, "eval"), tensorboard_port=board.port,
                         tensorboard_url=board.url)

    def stop(self) -> None:
        """Stop tracking (the record stays); returns once the stop-request watcher has ended."""
        self._finish()
        if threading.current_thread() is not self._watcher:  # a stop request can end the run, and so this
            self._watcher.join()

    def _finish(self) -> None:
        """Stop tracking without waiting for the watcher: it ends by itself once ``_done`` is set.
        The run's end is published while the run is not yet ``done``, so a watcher inside a stop
        request (``run.stop()`` waits for ``done``) could not be joined from that event."""
        self._done.set()
        self._unsubscribe()

    def _on_event(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            pace = pace_record(self._paces.progress(ended=True)) if self._paces else self.record.pace
            self._update(state=event.state, ended_at=event.t, error=(event.error.splitlines() or [None])[0],
                         pace=pace)
            if self.run.tracking is None:  # not logged to MLflow (a run's tracking starts with it)
                self._end_part("mlflow")
            self._end_part("run")
        elif isinstance(event, Pace):
            self._paces.add(event)
            self._update(throttle=True, pace=pace_record(self._paces.progress()))
        elif isinstance(event, LaunchSubmitted) and event.attempt:
            self._paces.reset()
            self._update(attempts=(*self.record.attempts, attempt_line(event)))
        elif isinstance(event, (Decommissioning, CheckpointSaved, AttemptEnded)):
            self._update(attempts=(*self.record.attempts, attempt_line(event)))
        elif isinstance(event, Step):
            changes: dict[str, Any] = {"step": event.step}
            if "loss" in event.metrics:
                changes["loss"] = float(event.metrics["loss"])
                if self._curve_of is None:  # the record's curve is one node's: the first that reports
                    self._curve_of = event.task
                if event.task == self._curve_of:
                    changes["point"] = (event.step, changes["loss"])
            self._update(throttle=True, **changes)
        elif isinstance(event, FindingRaised):
            self._update(findings=1)
        elif isinstance(event, MlflowRun):
            self._update(mlflow_run_id=event.mlflow_run_id or None, mlflow_url=event.url or None,
                         mlflow_tracking_uri=event.tracking_uri or None, mlflow_error=event.error or None)
            if event.complete:
                self._end_part("mlflow")
        elif isinstance(event, ModelDirUnshared):
            self._update(model_dir_unshared=event.nodes)
        elif isinstance(event, RunStateChanged):
            self._update(state=event.state)

    def _end_part(self, part: str) -> None:
        """The run (or its MLflow run) is complete; tracking stops once both are."""
        with self._lock:
            self._waiting_for.discard(part)
            done = not self._waiting_for
        if done:
            self._finish()

    def _update(self, throttle: bool = False, point: tuple[int, float] | None = None, findings: int = 0,
                **changes: Any) -> None:
        """Apply ``changes`` to the record (``point`` added to its curve, ``findings`` to its count)
        and write it, at most every ``STEP_WRITE_SECS`` when ``throttle``."""
        with self._lock:
            record = replace(self.record, findings=self.record.findings + findings, **changes)
            if point is not None:
                record = record.with_point(*point)
            if record == self.record:
                return
            self.record = record
            now = time.monotonic()
            if throttle and now - self._last_step_write < STEP_WRITE_SECS:
                return  # written with the next change (the run's end always writes)
            self._last_step_write = now
            registry.write_record(self.record)

    def _watch_stop_requests(self) -> None:
        watch_stop_requests(self.run.run_id, self._done.wait, self._on_stop, self._stop_failed)

    def _stop_failed(self, error: Exception) -> None:
        log.warning("run %s: a stop request failed: %s", self.run.run_id, error)
        self._update(error=f"stop request failed: {error}")


def owned_record(**fields: Any) -> RunRecord:
    """A new registry record owned by this process (its pid and start time, its kernel, its host)."""
    return RunRecord(owner_pid=os.getpid(), owner_create_time=psutil.Process().create_time(), kernel_id=kernel_id(),
                     host=socket.gethostname(), **fields)


def watch_stop_requests(run_id: str, ended: Callable[[float], bool], on_stop: Callable[[], None],
                        failed: Callable[[Exception], None]) -> None:
    """Carry out the stop requests other processes leave for ``run_id`` (``registry.request_stop``)
    until ``ended(secs)`` (waiting at most ``secs``) says it has ended; a request left then is dropped."""
    while not ended(STOP_POLL_SECS):
        if registry.take_stop_request(run_id):
            try:
                on_stop()
            except Exception as e:  # the record says why; the kernel goes on
                failed(e)
    registry.take_stop_request(run_id)


def pace_record(p: Progress) -> dict[str, float]:
    """The registry's ``pace`` of a run (see ``RunRecord.pace``)."""
    out = {"steps_per_sec": round(p.steps_per_sec, 3), "examples_per_sec": round(p.examples_per_sec, 3)}
    behind = p.behind
    if behind is not None:
        out.update(fraction=round(behind.fraction, 4), epoch=behind.epoch + 1, epochs=behind.epochs)
    if p.eta is not None:
        out["eta"] = round(p.eta, 1)
    if p.ended:
        out.update(steps=max(n.steps for n in p.nodes), examples=sum(n.examples for n in p.nodes))
    return out


def track(run: TrackedRun, on_stop: Callable[[], None] | None = None, parent: str | None = None) -> RunTracker:
    """Enter ``run`` in the registry and keep its record current until it ends.

    Args:
        run: a ``tfos_notebook.Run`` (started or not).
        on_stop: what a stop request from another process calls (default ``run.stop``).
        parent: the id of the sweep the run is a trial of.
    """
    return RunTracker(run, on_stop, parent)


def kernel_id() -> str | None:
    """This process's Jupyter kernel id, from its connection file (``kernel-<id>.json``)."""
    kernelapp = sys.modules.get("ipykernel.kernelapp")
    app = kernelapp.IPKernelApp.instance() if kernelapp and kernelapp.IPKernelApp.initialized() else None
    name = os.path.basename(getattr(app, "connection_file", "") or "")
    return name[len("kernel-"):-len(".json")] if name.startswith("kernel-") and name.endswith(".json") else None
