"""How fast a node trains, measured in the process that trains (the node's child).

The training loop pays for one timestamp per step (a Keras callback's batch end, ``ctx.report``)
and two per batch taken from the feed (a wait still under way counts in each window it spans); a thread of its own sums the window up about once a second
into a :class:`~..wire.messages.PaceReport` and writes it to the status pipe, off the training
path, which the node forwards with its other reports. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable

from ...wire.messages import PaceReport

log = logging.getLogger(__name__)

REPORT_SECS = 1.0


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


class Pace:
    """Step timing of one node, reported through ``emit`` every ``interval`` seconds while it moves.

    Steps come from a step counter the reporting thread reads (:meth:`count`: Keras's
    ``optimizer.iterations``, through ``StepTimer``, so Keras calls nothing per step) or, without
    one, from the step numbers of :meth:`reported` (``ctx.report``); examples from the feed
    (:meth:`fed`, InputMode.SPARK) or else from the batch size or what the reports say.
    """

    def __init__(self, emit: Callable[[PaceReport], None], interval: float = REPORT_SECS) -> None:
        self._emit, self.interval = emit, interval
        self._lock = threading.Lock()
        self.steps = 0  # read without the lock by a profile that counts steps
        self._samples: list[float] = []  # seconds per step, this window
        self._last_reported: tuple[int, float] | None = None  # (step, time) of the last ctx.report
        self._counter: Callable[[], int] | None = None
        self._counted = 0  # the counter's value at the last read
        self._batch_size = 0
        self._epoch_base = 0  # the counter's value when the epoch began
        self._examples = self._fed = 0
        self._window_examples = self._window_fed = 0
        self._window_steps = 0
        self._wait = 0.0
        self._taking_since: float | None = None  # the function waits for fed data since then
        self._input_measured = False
        self._step = self._total = self._epoch = self._epochs = self._epoch_step = self._epoch_steps = 0
        self._window_start = time.monotonic()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    # -- from the training loop (cheap) ----------------------------------------------------------
    def count(self, counter: Callable[[], int] | None, batch_size: int = 0) -> None:
        """Count steps with ``counter`` (the training's own step counter, read from the reporting
        thread), ``batch_size`` examples each; None: stop counting (after a last read)."""
        with self._lock:
            if self._counter is not None:
                self._read_counter()
            self._counter, self._batch_size = counter, batch_size
            if counter is not None:
                self._counted = self._epoch_base = counter()
        self._start()

    def reported(self, step: int, total: int = 0, examples: int = 0) -> None:
        """``ctx.report(step, ...)``: without a counter, the steps between two reports count."""
        now = time.monotonic()
        with self._lock:
            self._step, self._total = step, total or self._total
            self._examples += examples
            self._window_examples += examples
            last, self._last_reported = self._last_reported, (step, now)
            if self._counter is None and last is not None and step > last[0]:
                self._samples.append((now - last[1]) / (step - last[0]))
                self.steps += step - last[0]
                self._window_steps += step - last[0]
        self._start()

    def epoch(self, epoch: int, epochs: int, epoch_steps: int) -> None:
        """An epoch begins (``epoch`` from 0 of ``epochs``, ``epoch_steps`` steps each; 0: unknown)."""
        with self._lock:
            if self._counter is not None:
                self._read_counter()
                done = self._counted - self._epoch_base
                if epoch and done and not epoch_steps:
                    epoch_steps = done  # the last epoch's length stands for the next ones'
                self._epoch_base = self._counted
            self._epoch, self._epochs, self._epoch_steps = epoch, epochs, epoch_steps or self._epoch_steps
            self._epoch_step = 0

    def _read_counter(self) -> None:
        """Take the steps the counter ran since its last read (under the lock)."""
        value = self._counter()
        new = value - self._counted
        if new > 0:
            self.steps += new
            self._window_steps += new
            self._examples += new * self._batch_size
            self._window_examples += new * self._batch_size
        self._counted = value
        self._epoch_step = value - self._epoch_base

    def taking(self) -> None:
        """The function asks the feed for its next rows (and may wait for them)."""
        with self._lock:
            self._input_measured = True
            self._taking_since = time.monotonic()
        self._start()

    def fed(self, rows: int) -> None:
        """The feed handed the function ``rows`` rows (the wait since :meth:`taking` counts)."""
        now = time.monotonic()
        with self._lock:
            if self._taking_since is not None:
                self._wait += now - max(self._taking_since, self._window_start)
                self._taking_since = None
            self._fed += rows
            self._window_fed += rows

    # -- the reporting thread --------------------------------------------------------------------
    def _start(self) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is not None:
                    return
                self._thread = threading.Thread(target=self._loop, daemon=True, name="tfos-pace")
            self._thread.start()
            atexit.register(self.close)

    def report(self) -> PaceReport | None:
        """The window since the last report (None when nothing moved), and a new window."""
        now = time.monotonic()
        with self._lock:
            if self._counter is not None:
                try:
                    self._read_counter()
                except Exception as e:  # the model went away: count no more
                    log.debug("the step counter cannot be read: %s", e)
                    self._counter = None
            if self._counter is not None and self._window_steps:  # the window's mean step
                self._samples.append((now - self._window_start) / self._window_steps)
            if self._taking_since is not None:  # still waiting: this window's part counts now
                self._wait += now - max(self._taking_since, self._window_start)
            if not (self._window_steps or self._window_fed or self._wait):
                return None
            fed = self._input_measured and self._fed
            msg = PaceReport(
                steps=self.steps, secs=round(now - self._window_start, 4), window_steps=self._window_steps,
                step_secs=round(_median(self._samples), 6) if self._samples else 0.0,
                examples=self._fed if fed else self._examples,
                window_examples=self._window_fed if fed else self._window_examples,
                wait_secs=round(self._wait, 4), input_measured=self._input_measured, step=self._step,
                total_steps=self._total, epoch=self._epoch, epochs=self._epochs,
                epoch_step=self._epoch_step, epoch_steps=self._epoch_steps)
            self._samples, self._window_start = [], now
            self._window_steps = self._window_examples = self._window_fed = 0
            self._wait = 0.0
        return msg

    def _send(self) -> bool:
        msg = self.report()
        if msg is None:
            return True
        try:
            self._emit(msg)
            return True
        except OSError as e:  # the status pipe closed: the node is gone
            log.debug("pace reports stop: %s", e)
            return False

    def _loop(self) -> None:
        while not self._closed.wait(self.interval) and self._send():
            pass

    def close(self) -> None:
        """Send what the last window holds and stop (at the process's exit)."""
        self._closed.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(self.interval + 1)
        self._send()
