"""Profiling a running run: the driver asks its nodes, over the control channel, for a TensorFlow
profiler trace of the training as it runs, and waits until every trace is in the run's TensorBoard
mirror.

Each node's child captures in-process (``runtime/node/child/profiler.py``: no restart, no profiler port
to reach from outside) and the node ships the trace like an event file, so nodes on other hosts
need nothing more. The traces of one request form one profile session,
``plugins/profile/<session>/<role>_<index>.xplane.pb`` under the mirror's root, which the
Profile tab of the run's TensorBoard shows as one run with a host per node.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

from ...wire import messages as m
from ..errors import ConfigError
from ..events import Event, EventStream, NodeEvent, ProfileCaptured, RunFinished, TaskState
from .lifecycle import RunState
from .noderecord import NodeRecord
from .supervised import FileSink


class ProfiledRun(Protocol):
    """What a profile request reads of its run (``launch.Run``)."""

    name: str
    events: EventStream

    @property
    def state(self) -> RunState: ...

    @property
    def done(self) -> bool: ...

    @property
    def nodes(self) -> list[NodeRecord]: ...

    @property
    def file_sink(self) -> FileSink | None: ...

    def tell(self, nodes: list[str], msg: m.Message) -> None: ...

MAX_SECONDS = 300.0
SHIP_GRACE_SECS = 30.0  # past the capture, for the nodes to stop the profiler and ship their traces
STEPS_WAIT_SECS = 120.0  # a profile of K steps waits at most this long for them (profiler.MAX_STEPS_WAIT_SECS)
#: Why a profiled node of a run with collectives may fail (TensorFlow's host tracer, docs/insight.md).
CRASH_RISK = ("TensorFlow's profiler can crash a node of a synchronous multi-worker run as it collects the trace "
              "(docs/insight.md)")


@dataclass
class ProfileResult:
    """The traces of one profile request: ``session`` (the Profile tab's run), and for each node
    asked (``role:index``) whether its trace arrived (``traces``) or why not (``failures``; a node
    that did not answer in time says so)."""

    session: str
    nodes: tuple[str, ...]
    traces: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures and len(self.traces) == len(self.nodes)


def session_name(now: float | None = None) -> str:
    """A session named as TensorFlow names its own (``2026_11_22_15_30_00``): they sort by time."""
    return time.strftime("%Y_%m_%d_%H_%M_%S", time.localtime(now))


def check_request(run: ProfiledRun, seconds: float | None, steps: int | None, nodes: list[str] | None) -> list[str]:
    """The nodes to profile, or ``ConfigError`` saying what is wrong with the request, at once."""
    state = run.state
    if state.terminal or state.ending:
        raise ConfigError(f"run {run.name} has {'ended' if state.terminal else 'begun to end'} ({state}): only a "
                          "running run can be profiled, and its nodes' processes are gone; profile the next run "
                          "while it trains")
    if state is not RunState.RUNNING:
        raise ConfigError(f"run {run.name} is {state}: its nodes are not training yet; profile it once it runs")
    if (seconds is None) == (steps is None):
        raise ConfigError("give either seconds or steps: how long each node records its trace")
    if seconds is not None and not 0 < seconds <= MAX_SECONDS:
        raise ConfigError(f"seconds must be more than 0 and at most {MAX_SECONDS:.0f}, got {seconds}")
    if steps is not None and steps < 1:
        raise ConfigError(f"steps must be 1 or more, got {steps}")
    if run.file_sink is None:
        raise ConfigError(f"run {run.name} has no TensorBoard to receive the traces: start one first "
                          f"(%tfos_tensorboard {run.name}, or tfos_notebook.tensorboard.attach_tensorboard(run))")
    live = [n.name for n in run.nodes if n.state.live and n.conn is not None]
    chosen = list(nodes) if nodes else live
    unknown = [n for n in chosen if n not in live]
    if unknown or not chosen:
        raise ConfigError(f"run {run.name} has no running node {', '.join(unknown) or '(none)'}: its running "
                          f"nodes are {', '.join(live) or 'none'}")
    return chosen


def request_profile(run: ProfiledRun, seconds: float | None = None, steps: int | None = None,
                    nodes: list[str] | None = None) -> ProfileResult:
    """Ask ``nodes`` (``role:index``; default: every running node) of ``run`` for a trace of
    ``seconds`` seconds or ``steps`` training steps; return once every trace is in the run's
    TensorBoard mirror (or a node said why not, or did not answer in time, or the run ended)."""
    chosen = check_request(run, seconds, steps, nodes)
    session = session_name()
    result = ProfileResult(session, tuple(chosen))
    answered = threading.Event()
    lock = threading.Lock()

    def on_event(e: Event) -> None:
        with lock:
            name = e.name if isinstance(e, NodeEvent) else None
            if isinstance(e, ProfileCaptured) and e.session == session and name in chosen:
                if e.ok:
                    result.traces.append(name)
                else:
                    result.failures[name] = e.detail
            elif isinstance(e, TaskState) and e.state in ("failed", "stopped") and name in chosen:
                if name not in result.traces and name not in result.failures:
                    result.failures[name] = f"its process ended ({e.state}) before its trace arrived" + (
                        f": {CRASH_RISK}" if e.state == "failed" else "")
            if len(result.traces) + len(result.failures) == len(chosen) or isinstance(e, RunFinished):
                answered.set()

    unsubscribe = run.events.subscribe(on_event, replay=False)
    try:
        run.tell(chosen, m.Profile(session, float(seconds or 0.0), int(steps or 0)))
        limit = (seconds if seconds is not None else STEPS_WAIT_SECS) + SHIP_GRACE_SECS
        answered.wait(limit)
        with lock:
            for name in chosen:
                if name not in result.traces and name not in result.failures:
                    result.failures[name] = (f"no trace within {limit:.0f}s" if not run.done
                                             else f"the run ended ({run.state}) before its trace arrived")
    finally:
        unsubscribe()
    return result
