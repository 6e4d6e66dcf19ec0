"""An evaluation of a run's checkpoints on a background thread of the driver (made by
:func:`.evaluate.evaluate_run`): its loop over new checkpoints, its failures, its registry record
and how it shows."""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import psutil

from ..errors import ConfigError, TFOSError
from ..runtime.host.paths import SHARED_STORAGE
from ..runtime.host.procs import lower_thread_priority
from ..state import registry
from .capture import cell_traceback
from .checkpoints import Checkpoint, CheckpointScanner
from .evalcell import EvaluationCell
from .evalout import EvaluationOutput, Metrics, as_metrics, one_line
from .frontend import OutputTarget
from .view import format_metrics

log = logging.getLogger(__name__)

PREFIX = "[tfos]"


class EvaluationError(TFOSError):
    """The evaluation function failed on too many checkpoints in a row; the evaluation stopped."""


@dataclass(frozen=True)
class EvaluationFailure:
    """The evaluation function raised (or returned no metrics) on one checkpoint.

    Attributes: step and path of the checkpoint; error: one line (``ValueError: ...``);
    traceback: the traceback from the function's own frame down.
    """

    step: int
    path: str
    error: str
    traceback: str


class Evaluation:
    """An evaluation of a run's checkpoints running on a background thread.

    Made by :func:`evaluate_run`. ``state`` is ``waiting`` (for the next checkpoint),
    ``evaluating``, ``finished`` (the run ended and every checkpoint was evaluated), ``stopped``
    (``stop()``) or ``failed`` (the function failed on ``max_failures`` checkpoints in a row);
    ``results`` lists ``(step, metrics)`` per evaluated checkpoint, ``failures`` the
    :class:`EvaluationFailure` of each checkpoint the function failed on, and ``logdir`` is where
    the scalars go (None until the first is written).

    A function that fails on one checkpoint is reported (a line with the error; the traceback in
    ``failures``) and the next checkpoint is evaluated anyway; after ``max_failures`` failures in a
    row the evaluation stops and ``wait()`` raises :class:`EvaluationError`.

    The evaluation has a record of its own in the runs registry (kind ``evaluation``, ``parent``
    the run), kept current with its state and latest metrics, so the runs sidebar shows it beside
    its run. ``monitor`` is the widget that shows it in the notebook (None for text lines).
    """

    def __init__(self, record: Any, fn: Callable[[Checkpoint], Mapping[str, Any]], *, every: float = 10.0,
                 name: str = "eval", settle: float = 2.0, max_failures: int = 3, latest_only: bool = False,
                 lookup: Callable[[str], Any] | None = None, say: Callable[[str], None] = print,
                 target: OutputTarget | None = None) -> None:
        self.run_id, self.run_name, self.name = record.run_id, record.name, name
        self.fn, self.every, self.max_failures, self.latest_only = fn, every, max_failures, latest_only
        self.settle = settle
        self.scanner = CheckpointScanner(record.model_dir, settle)
        self.results: list[tuple[int, Metrics]] = []
        self.failures: list[EvaluationFailure] = []
        self.state = "waiting"
        self._record = record
        self._lookup = lookup or registry.get_run
        self._say_to, self.target = say, target or OutputTarget()
        self.out = EvaluationOutput(name, say=self._say)
        self.monitor: Any = None
        self._entry = registry.RunRecord(
            run_id=f"{record.run_id}-{name}", name=f"{name} of {record.name}", state="waiting",
            owner_pid=os.getpid(), owner_create_time=psutil.Process().create_time(), host=record.host, kind="evaluation",
            parent=record.run_id, model_dir=record.model_dir, tensorboard_port=record.tensorboard_port,
            tensorboard_url=record.tensorboard_url)
        self._stop = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"tfos-eval-{self.run_id}-{name}")

    @property
    def logdir(self) -> str | None:
        """Where the scalars go (None until the first is written)."""
        return self.out.logdir

    # -- control ---------------------------------------------------------------------------------
    def start(self) -> Evaluation:
        # Said on the caller's thread, so the line lands under the cell that started the evaluation.
        self._say(f"watching {self.scanner.model_dir} for checkpoints every {self.every:g}s")
        self._thread.start()
        return self

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the checkpoint being evaluated (if any); returns once the thread ended."""
        self._stop.set()
        self._thread.join(timeout)

    def wait(self, timeout: float | None = None) -> list[tuple[int, Metrics]]:
        """Block until the evaluation ends (the run ended and its last checkpoint was evaluated) and
        return ``results``.

        Raises:
            EvaluationError: it stopped because the function failed ``max_failures`` times in a row.
            TimeoutError: still going after ``timeout`` seconds.
        """
        with self.target.follow_caller():
            if not self._done.wait(timeout):
                raise TimeoutError(f"evaluation of run {self.run_name} still {self.state} after {timeout}s")
        if self.state == "failed":
            last = self.failures[-1]
            if last.step < 0:  # not the function: the model dir or the evaluation itself
                raise EvaluationError(f"evaluation of run {self.run_name} stopped: {last.error}")
            raise EvaluationError(f"evaluation of run {self.run_name} stopped: the function failed on "
                                  f"{_checkpoints(self.max_failures)} in a row; the last, step {last.step} "
                                  f"({last.path}):\n{last.traceback.rstrip()}")
        return list(self.results)

    # -- the loop --------------------------------------------------------------------------------
    def _publish(self, ended: bool = False) -> None:
        """Write the evaluation's registry record: its state and latest metrics."""
        changes: dict[str, Any] = {"state": self.state, "findings": len(self.failures)}
        if self.results:
            step, metrics = self.results[-1]
            changes.update(step=step, metrics=metrics, loss=metrics.get("loss"))
        if self.failures:
            changes["error"] = self.failures[-1].error
        if ended:
            changes["ended_at"] = time.time()
        self._entry = replace(self._entry, **changes)
        try:
            registry.write_record(self._entry)
        except OSError as e:  # the registry is a view: the evaluation goes on without it
            log.warning("evaluation of run %s: cannot write its registry record: %s", self.run_name, e)

    def _loop(self) -> None:
        lower_thread_priority()
        self._publish()
        try:
            self._watch()
        except Exception as e:  # a bug or a broken model dir: say it rather than die silently
            log.exception("evaluation of run %s", self.run_name)
            self.state = "failed"
            self.failures.append(EvaluationFailure(-1, self.scanner.model_dir, one_line(e),
                                                   traceback.format_exc()))
            self._say(f"stopped: {one_line(e)}")
        finally:
            self.out.close()
            self._publish(ended=True)
            self._done.set()

    def _watch(self) -> None:
        ended_at: float | None = None
        while not self._stop.is_set():
            record = self._refresh()
            check_shared(record)  # known once the run's nodes registered
            if record.ended and ended_at is None:
                ended_at = time.monotonic()
            checkpoints, pending = self.scanner.scan(final=ended_at is not None)
            if self.latest_only and not ended_at:
                checkpoints = checkpoints[-1:]
            for checkpoint in checkpoints:
                if self._stop.is_set():
                    break
                self._evaluate(checkpoint)
                if self.state == "failed":
                    return
            if ended_at is not None:
                # the run wrote its last file before it ended: what is still unfinished once every
                # file settled never will be
                if not pending or time.monotonic() - ended_at > 2 * self.settle + 1:
                    self._finish(record, pending)
                    return
                self._stop.wait(min(0.5, self.every))
                continue
            if self.state != "waiting":
                self.state = "waiting"
                self._publish()
            self._stop.wait(self.every)
        self.state = "stopped"
        self._say(f"stopped after {_checkpoints(len(self.results))}")

    def _refresh(self) -> Any:
        """The run's latest registry record (the last one read if the registry cannot be read)."""
        try:
            self._record = self._lookup(self.run_id)
        except (OSError, ValueError, TFOSError) as e:
            log.warning("evaluation of run %s: cannot read the run's record: %s", self.run_name, e)
        return self._record

    def _finish(self, record: Any, unfinished: list[str]) -> None:
        for name in unfinished:
            self._say(f"skipped {name}: it was never completely written")
        self.state = "finished"
        self._say(f"finished: {_checkpoints(len(self.results))} evaluated, {len(self.failures)} failed "
                  f"(run {record.state})")

    def _evaluate(self, checkpoint: Checkpoint) -> None:
        self.state = "evaluating"
        self._publish()
        try:
            metrics = as_metrics(self.fn(checkpoint))
        except Exception as e:
            tb = e.__traceback__.tb_next if e.__traceback__ is not None else None  # from the function's frame
            text = "".join(traceback.format_exception(type(e), e, tb))
            if isinstance(self.fn, EvaluationCell):
                text = cell_traceback(text, self.fn.filename)
            failure = EvaluationFailure(checkpoint.step, checkpoint.path, one_line(e), text)
            self.failures.append(failure)
            self._publish()
            self._say(f"step {checkpoint.step} failed: {failure.error}")
            if self._failed_in_a_row() >= self.max_failures:
                self.state = "failed"
                self._say(f"stopped: the function failed on {_checkpoints(self.max_failures)} in a row "
                          "(tracebacks in .failures)")
            return
        self.out.write(self._record, checkpoint.step, metrics)
        self.results.append((checkpoint.step, metrics))
        first = metrics.get("loss", next(iter(metrics.values())))
        self._entry = self._entry.with_point(checkpoint.step, first)
        self._publish()
        self._say(format_metrics(checkpoint.step, metrics))

    def _failed_in_a_row(self) -> int:
        last_ok = self.results[-1][0] if self.results else None
        return sum(1 for f in self.failures if last_ok is None or f.step > last_ok)

    def _say(self, text: str) -> None:
        try:
            with self.target.active():
                self._say_to(f"{PREFIX} {self.name} of {self.run_name}: {text}")
        except Exception:  # a broken output must not stop the evaluation
            log.exception("evaluation output failed")

    # -- display ---------------------------------------------------------------------------------
    def summary(self) -> str:
        last = f"; last: {format_metrics(*self.results[-1])}" if self.results else ""
        failed = f", {len(self.failures)} failed" if self.failures else ""
        return (f"evaluation {self.name} of run {self.run_name}: {self.state}, {_checkpoints(len(self.results))} "
                f"evaluated{failed}{last}")

    def __repr__(self) -> str:
        return f"<Evaluation {self.summary()}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.summary())

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        bundle = self.monitor._repr_mimebundle_(**kwargs) if self.monitor is not None else {}
        bundle["text/plain"] = self.summary()
        return bundle


def _checkpoints(n: int) -> str:
    return f"{n} checkpoint" if n == 1 else f"{n} checkpoints"


def check_shared(record: Any) -> None:
    """ConfigError when the run's model dir is local to each host: its checkpoints are on the chief's."""
    if record.model_dir_unshared:
        raise ConfigError(
            f"run {record.name} keeps its checkpoints in {record.model_dir} on the chief's own host, which this "
            f"driver does not share ({', '.join(record.model_dir_unshared)} do not see the driver's files there), "
            f"so there is nothing here to evaluate: launch the run with a --model-dir on {SHARED_STORAGE}")
