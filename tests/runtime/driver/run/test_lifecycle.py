"""A run's lifecycle without Spark or TensorFlow.

Spark is replaced by ``FakeBackend`` (tests/fakerun.py; no Spark can be involved in these tests by
design: they check the driver's state machine, its coordinator and its control channel in a second
or less each). Its barrier "tasks" are threads that play scripted nodes: they connect to the run's
real control server with the run's secret and speak the real typed protocol, as a node would.
"""

from __future__ import annotations

import pickle
import socket
import struct
import sys
import threading
import time
import types

import msgpack
import pytest
from fakerun import FakeBackend, FakeNode, finish_with, start, states

from tfos_notebook.runtime.driver.errors import (
    ChannelError,
    ConfigError,
    NodeError,
    ReservationTimeout,
    ResultError,
    RunStopped,
    SparkJobError,
)
from tfos_notebook.runtime.driver.events import (
    EventStream,
    FindingRaised,
    ProfileCaptured,
    RunFinished,
    RunStateChanged,
    TaskState,
)
from tfos_notebook.runtime.driver.run.coordinator import Coordinator
from tfos_notebook.runtime.driver.run.launch import Run
from tfos_notebook.runtime.driver.run.lifecycle import IllegalTransition, Lifecycle, RunState
from tfos_notebook.runtime.driver.spark import ClusterView, ExecutorInfo
from tfos_notebook.runtime.wire import messages as m
from tfos_notebook.runtime.wire.states import NodeState


def test_a_run_goes_new_reserving_running_finished_and_returns_the_chief_value():
    run = start(finish_with(42))
    assert run.wait(10) == 42
    assert states(run) == ["reserving", "running", "finished"]
    assert run.state is RunState.FINISHED and run.node_states() == {"chief:0": "finished", "worker:0": "finished"}
    assert isinstance(run.events.events(RunStateChanged)[-1], RunFinished)


def test_start_twice_is_refused_at_once_and_launches_nothing_more():
    run = start(finish_with(1))
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="was already started"):
        run.start()
    assert time.monotonic() - t0 < 5  # a ceiling: refused without waiting on the run (typically under 1 ms)
    run.wait(10)
    assert run.backend.jobs == 1


def test_stop_before_start_ends_the_run_at_once_and_it_cannot_start():
    run = Run(FakeBackend(finish_with(1)), lambda a, c: None, None, 2)
    t0 = time.monotonic()
    run.stop()
    assert time.monotonic() - t0 < 5  # a ceiling: nothing to wait for (typically under 1 ms)
    assert run.state is RunState.STOPPED and isinstance(run.error, RunStopped)
    with pytest.raises(ConfigError, match="already started"):
        run.start()


def test_wait_on_a_run_never_started_says_so_at_once():
    run = Run(FakeBackend(finish_with(1)), lambda a, c: None, None, 2)
    for call in (run.wait, run.wait_for_reservations):
        with pytest.raises(ConfigError, match="never started: call start"):
            call(1)


class Attached(Run):
    """A run extended from above the runtime, as ``tfos_notebook.Run`` attaches its MLflow logger."""

    def __init__(self, *args, fail: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fail, self.seen = fail, []

    def _before_submit(self) -> None:
        self.seen.append((self.state, self._lock._is_owned(), self.backend.jobs))
        if self.fail:
            raise RuntimeError("cannot attach")
        self.relay_mlflow = True


def test_a_class_above_the_runtime_attaches_under_the_lock_right_before_the_job():
    relayed = []

    def script(plan, task, cancel):
        relayed.append(plan.mlflow)
        return finish_with(7)(plan, task, cancel)

    run = Attached(FakeBackend(script), lambda a, c: None, None, 2, stop_grace_secs=0.5, preflight_wait=0).start()
    assert run.wait(10) == 7
    assert run.seen == [(RunState.RESERVING, True, 0)] and relayed == [True, True]


def test_what_the_attachment_raises_ends_the_run_before_its_job():
    run = Attached(FakeBackend(finish_with(1)), lambda a, c: None, None, 2, preflight_wait=0, fail=True)
    with pytest.raises(RuntimeError, match="cannot attach"):
        run.start()
    assert run.state is RunState.FAILED and isinstance(run.error, RuntimeError) and run.backend.jobs == 0


def test_stop_mid_run_tells_every_node_and_ends_stopped():
    told = []

    def script(plan, task, cancel):
        node = FakeNode(plan, task)
        node.register()
        node.send(m.NodeStateReport("running", 1))
        told.append(node.wait_for_stop())
        node.send(m.Result(ok=False, stopped=True, exit_code=-15))
        node.close()
        return {}

    run = start(script)
    run.wait_for_reservations(5)
    run.stop(10)
    assert [stop.stacks for stop in told] == [False, False]  # a stop asked for: no stacks wanted
    assert run.state is RunState.STOPPED and isinstance(run.error, RunStopped)
    assert states(run) == ["reserving", "running", "stopping", "stopped"]


def test_an_exception_in_the_function_fails_the_run_without_a_retry():
    told = []

    def script(plan, task, cancel):
        node = FakeNode(plan, task)
        node.register()
        if task == 1:
            node.send(m.Result(ok=False, traceback="Traceback...\nValueError: bad input", exit_code=1))
        else:
            told.append(node.wait_for_stop())
            node.send(m.Result(ok=False, stopped=True, exit_code=-15))
        node.close()
        return {}

    run = start(script)
    with pytest.raises(NodeError, match="ValueError: bad input") as info:
        run.wait(10)
    assert (info.value.role, info.value.index) == ("worker", 0)
    assert run.backend.jobs == 1 and states(run) == ["reserving", "running", "failing", "failed"]
    assert [stop.stacks for stop in told] == [True]  # the others write where they were before they stop


def test_a_lost_node_relaunches_the_run_which_then_finishes():
    def script(plan, task, cancel):
        node = FakeNode(plan, task)
        node.register()
        if plan.attempt == 0 and task == 1:
            node.close()  # the executor died: no result
            return {}
        if plan.attempt == 0:
            node.wait_for_stop()
            node.send(m.Result(ok=False, stopped=True, exit_code=-15))
            node.close()
            return {}
        node.send(m.Result(ok=True, value=pickle.dumps(task), exit_code=0))
        node.close()
        return {}

    run = start(script, retries=1)
    assert run.wait(20) == 0
    assert run.attempt == 1 and run.backend.jobs == 2
    assert states(run) == ["reserving", "running", "relaunching", "reserving", "running", "finished"]


@pytest.fixture
def fast_heartbeats(monkeypatch):
    """Heartbeats scaled down (every 0.2 s; silent for 3 s: lost) so these tests take seconds."""
    from tfos_notebook.runtime.driver.run import heartbeat

    monkeypatch.setattr(m, "HEARTBEAT_SECS", 0.2)
    monkeypatch.setattr(m, "NODE_SILENT_SECS", 3.0)
    monkeypatch.setattr(heartbeat, "SUSPECT_SECS", 0.6)


def test_a_node_that_stops_answering_is_lost_with_its_host_named_and_the_run_relaunched(fast_heartbeats):
    def script(plan, task, cancel):
        node = FakeNode(plan, task)
        node.register()
        if plan.attempt == 0 and task == 1:
            cancel.wait(10)  # its host is cut off: it hears nothing and says nothing
        elif plan.attempt == 0:
            node.wait_for_stop()
            node.send(m.Result(ok=False, stopped=True, exit_code=-15))
        else:
            node.send(m.Result(ok=True, value=pickle.dumps(task), exit_code=0))
        node.close()
        return {}

    run = start(script, retries=1)
    t0 = time.monotonic()
    assert run.wait(20) == 0
    findings = [f for f in run.diagnose() if f.code == "node_unreachable"]
    assert len(findings) == 1 and "worker:0 on 127.0.0.1 stopped answering" in findings[0].cause
    assert run.attempt == 1 and states(run)[:3] == ["reserving", "running", "relaunching"]
    assert time.monotonic() - t0 < 15


def test_a_failure_while_a_peer_is_silent_is_blamed_on_the_silent_peer_and_retried(fast_heartbeats):
    def script(plan, task, cancel):
        node = FakeNode(plan, task)
        node.register()
        if plan.attempt == 0 and task == 1:
            cancel.wait(10)  # cut off
        elif plan.attempt == 0:  # its collective with the cut-off peer times out first
            node.answer_pings(1.0)
            node.send(m.Result(ok=False, traceback="Traceback...\nDeadlineExceeded: collective timed out",
                               exit_code=1))
        else:
            node.send(m.Result(ok=True, value=pickle.dumps(task), exit_code=0))
        node.close()
        return {}

    run = start(script, retries=1)
    assert run.wait(20) == 0  # relaunched, as for any lost node
    finding = next(f for f in run.diagnose() if f.code == "node_unreachable")
    assert "worker:0 on 127.0.0.1" in finding.cause
    assert any("chief:0 failed meanwhile" in e and "DeadlineExceeded" in e for e in finding.evidence), finding


def test_a_failure_with_every_peer_answering_fails_the_run_at_once(fast_heartbeats):
    def script(plan, task, cancel):
        node = FakeNode(plan, task)
        node.register()
        if task == 0:
            node.answer_pings(1.0)
            node.send(m.Result(ok=False, traceback="Traceback...\nValueError: bad", exit_code=1))
        else:
            node.wait_for_stop()
            node.send(m.Result(ok=False, stopped=True, exit_code=-15))
        node.close()
        return {}

    run = start(script, retries=1)
    with pytest.raises(NodeError, match="ValueError: bad"):
        run.wait(10)
    assert run.backend.jobs == 1 and not [f for f in run.diagnose() if f.code == "node_unreachable"]


def test_a_node_killed_by_a_signal_every_attempt_fails_after_the_retries():
    def script(plan, task, cancel):
        node = FakeNode(plan, task)
        node.register()
        if task == 0:
            node.send(m.Result(ok=False, traceback="", exit_code=-9))
        else:
            node.wait_for_stop()
        node.close()
        return {}

    run = start(script, retries=1)
    with pytest.raises(NodeError, match=r"after 2 attempts; retries=1"):
        run.wait(20)
    assert run.backend.jobs == 2


def _pickle_of_an_object_whose_module_the_driver_lacks() -> bytes:
    module = types.ModuleType("no_such_module_x")
    exec("class Foo:\n    pass\n", module.__dict__)
    sys.modules[module.__name__] = module
    try:
        return pickle.dumps(module.Foo())
    finally:
        del sys.modules[module.__name__]


def test_a_result_the_driver_cannot_unpickle_fails_the_run_naming_the_type_and_is_not_retried():
    payload = _pickle_of_an_object_whose_module_the_driver_lacks()

    def script(plan, task, cancel):
        node = FakeNode(plan, task)
        node.register()
        node.send(m.Result(ok=True, value=payload if task == 0 else pickle.dumps(None),
                           value_type="no_such_module_x.Foo", exit_code=0))
        node.close()
        return {}

    run = start(script, retries=2)
    with pytest.raises(ResultError, match=r"type no_such_module_x\.Foo that the driver cannot unpickle") as info:
        run.wait(10)
    assert "ModuleNotFoundError" in str(info.value)
    assert run.backend.jobs == 1  # not retrained


def test_a_malformed_message_is_counted_and_the_node_is_not_lost():
    def script(plan, task, cancel):
        node = FakeNode(plan, task)
        node.register()
        node.conn.send({"type": "step", "step": "not a number"})
        node.conn.send({"type": "no_such_type"})
        node.conn.send_frame(msgpack.packb([1, 2, 3]))
        node.send(m.Result(ok=True, value=pickle.dumps(task), exit_code=0))
        node.close()
        return {}

    run = start(script)
    assert run.wait(10) == 0
    assert run.control.server.malformed == 6 and run.control.server.rejected == 0
    assert run.backend.jobs == 1


def test_late_messages_from_a_stale_attempt_are_ignored():
    stale: list[FakeNode] = []

    def script(plan, task, cancel):
        node = FakeNode(plan, task)
        node.register()
        if plan.attempt == 0:
            if task == 1:
                node.close()
                return {}
            stale.append(node)  # stays connected past its attempt
            node.wait_for_stop()
            return {}
        # attempt 1: the lost attempt's node speaks up before this one finishes
        stale[0].send(m.Result(ok=False, traceback="late failure", exit_code=1))
        stale[0].send(m.Register(task=0, attempt=0, host="127.0.0.1", port=1, pid=1))
        time.sleep(0.2)
        node.send(m.Result(ok=True, value=pickle.dumps("fresh"), exit_code=0))
        node.close()
        return {}

    run = start(script, retries=1, master_node=None)
    assert run.wait(20) == "fresh"
    assert run.state is RunState.FINISHED


def test_reservation_timeout_fails_with_findings_naming_the_missing_nodes():
    def script(plan, task, cancel):
        if task == 0:
            node = FakeNode(plan, task)
            told.append(node.register())  # the answer to a registration is the cluster spec, or stop
            node.close()
        else:
            cancel.wait(10)  # never starts, as if it waited for a slot
        return {}

    told: list = []
    run = start(script, reservation_timeout=1.0)
    with pytest.raises(ReservationTimeout, match="got 1") as info:
        run.wait(15)
    assert [f.code for f in info.value.findings] == ["registration_stalled"]
    assert "missing: worker:0" in info.value.findings[0].evidence
    assert told == [m.Stop()]
    assert run.backend.cancelled  # the lingering job was cancelled after the stop grace


def test_illegal_transitions_are_refused_and_publish_nothing():
    events = EventStream()
    life = Lifecycle("r", events)
    with pytest.raises(IllegalTransition, match="new -> running"):
        life.transition(RunState.RUNNING)
    assert not events.events()
    life.transition(RunState.RESERVING)
    life.transition(RunState.FAILED, RuntimeError("x"))
    assert life.done.is_set() and not life.try_transition(RunState.RUNNING)
    assert [e.state for e in events.events(RunStateChanged)] == ["reserving", "failed"]


class FakeConn:
    def __init__(self) -> None:
        self.attrs: dict = {}
        self.sent: list[dict] = []

    def send(self, msg: dict) -> None:
        self.sent.append(msg)

    def close(self) -> None:
        self.attrs["closed"] = True


class Hooks:
    def __init__(self) -> None:
        self.calls: list = []
        self.is_ending = False

    def cluster_ready(self, spec):
        self.calls.append(("ready", spec))
        return True

    def node_failed(self, error, retryable):
        self.calls.append(("failed", type(error).__name__, retryable))

    def ending(self):
        return self.is_ending

    def foreground_done(self):
        self.calls.append(("done",))

    def findings(self, findings):
        pass

    def leftovers(self, items):
        self.calls.append(("leftovers", items))

    def versions(self, node, python, tensorflow):
        pass

    def files(self, node_dir, chunks):
        return {"a": 0} if chunks else None

    def feed(self, node, msg):
        self.calls.append(("feed", msg))

    def model_dir_unseen(self, nodes):
        self.calls.append(("unseen", nodes))


def coordinator(roles=(("chief", 0), ("worker", 0))) -> tuple[Coordinator, Hooks, EventStream]:
    hooks, events = Hooks(), EventStream()
    return Coordinator("r", list(roles), 0, events, threading.RLock(), hooks), hooks, events


def test_coordinator_sends_the_cluster_spec_once_every_node_registered():
    coord, hooks, _ = coordinator()
    a, b = FakeConn(), FakeConn()
    coord.handle(a, m.Register(task=0, attempt=0, host="h0", port=1, pid=1))
    assert not a.sent and coord.missing() == ["worker:0"]
    coord.handle(b, m.Register(task=1, attempt=0, host="h1", port=2, pid=2))
    spec = {"chief": ["h0:1"], "worker": ["h1:2"]}
    assert a.sent == b.sent == [{"type": "cluster", "cluster_spec": spec, "model_dir_shared": True}]
    assert hooks.calls == [("ready", spec)]


def test_coordinator_tells_the_nodes_when_one_does_not_see_the_model_dir_and_names_its_host():
    coord, hooks, _ = coordinator()
    a, b = FakeConn(), FakeConn()
    coord.handle(a, m.Register(task=0, attempt=0, host="10.0.0.1", port=1, pid=1, hostname="h0"))
    coord.handle(b, m.Register(task=1, attempt=0, host="10.0.0.2", port=2, pid=2, hostname="h1",
                               sees_model_dir=False))
    assert hooks.calls[-1] == ("unseen", ["worker:0 on h1 (10.0.0.2)"])
    assert a.sent[0]["model_dir_shared"] is False and b.sent[0]["model_dir_shared"] is False


def test_coordinator_refuses_a_duplicate_registration_and_messages_before_one():
    coord, _, _ = coordinator()
    coord.handle(FakeConn(), m.Register(task=0, attempt=0, host="h", port=1, pid=1))
    with pytest.raises(ChannelError, match="duplicate registration"):
        coord.handle(FakeConn(), m.Register(task=0, attempt=0, host="h", port=1, pid=1))
    with pytest.raises(ChannelError, match="before registration"):
        coord.handle(FakeConn(), m.StepReport(1))


def test_coordinator_reports_a_lost_node_as_retryable_but_not_while_the_run_ends():
    coord, hooks, events = coordinator()
    a, b = FakeConn(), FakeConn()
    coord.handle(a, m.Register(task=0, attempt=0, host="h0", port=1, pid=1))
    coord.handle(b, m.Register(task=1, attempt=0, host="h1", port=2, pid=2))
    coord.closed(a)
    assert hooks.calls[-1] == ("failed", "NodeError", True)
    assert [e.state for e in events.events(TaskState)] == ["failed"]
    hooks.is_ending = True
    coord.closed(b)
    assert hooks.calls[-1] == ("failed", "NodeError", True) and len(hooks.calls) == 2


def test_coordinator_puts_a_node_trace_under_the_mirror_root_and_refuses_any_other_profile_file():
    coord, hooks, events = coordinator(roles=(("chief", 0),))
    received = []
    hooks.files = lambda prefix, chunks: received.append((prefix, [c.relpath for c in chunks])) or {}
    a = FakeConn()
    coord.handle(a, m.Register(task=0, attempt=0, host="h0", port=1, pid=1))
    trace = "plugins/profile/2026_01_01_00_00_00/chief_0.xplane.pb"
    coord.handle(a, m.Files(((trace, 0, b"x"),), m.PROFILE_AREA))
    coord.handle(a, m.Files((("events.out", 0, b"x"),)))
    assert received == [("", [trace]), ("chief_0", ["events.out"])]
    with pytest.raises(ChannelError, match=r"chief:0 sent a profile file 'plugins/profile/s/worker_0.xplane.pb', "
                                           r"not one of its traces \(plugins/profile/<session>/chief_0.xplane.pb\)"):
        coord.handle(a, m.Files((("plugins/profile/s/worker_0.xplane.pb", 0, b"x"),), m.PROFILE_AREA))
    coord.handle(a, m.ProfileDone("2026_01_01_00_00_00", True, "1 bytes"))
    [done] = events.events(ProfileCaptured)
    assert (done.role, done.session, done.ok) == ("chief", "2026_01_01_00_00_00", True)


def test_coordinator_ignores_a_late_state_of_an_ended_node_and_rewinds_files():
    coord, hooks, _ = coordinator(roles=(("chief", 0),))
    a = FakeConn()
    coord.handle(a, m.Register(task=0, attempt=0, host="h0", port=1, pid=1))
    coord.handle(a, m.Files((("a", 5, b"x"),)))
    assert a.sent[-1] == {"type": "files_rewind", "files": {"a": 0}, "area": ""}
    coord.handle(a, m.Result(ok=True, value=pickle.dumps(1)))
    assert ("done",) in hooks.calls
    coord.handle(a, m.NodeStateReport("running"))  # late: the node already finished
    assert coord.nodes[0].state is NodeState.FINISHED


@pytest.mark.parametrize("raw, why", [
    ({"type": "register", "task": "0", "attempt": 0, "host": "h", "port": 1, "pid": 1}, "field 'task'"),
    ({"type": "register", "attempt": 0, "host": "h", "port": 1, "pid": 1}, "no 'task'"),
    ({"type": "logs", "lines": [["stdout"]]}, "field 'lines'"),
    ({"type": "result", "ok": 1}, "field 'ok'"),
    ({"type": "files", "chunks": [["a", 0, "text"]]}, "field 'chunks'"),
    ({"type": 7}, "unknown type"),
    ([1], "expected a map"),
])
def test_decode_refuses_malformed_messages_naming_the_field(raw, why):
    with pytest.raises(ChannelError, match=why):
        m.decode(raw)


def test_every_message_survives_the_wire():
    samples = [m.Register(task=1, attempt=2, host="h", port=3, pid=4, gpus=("0",)), m.Logs((("stdout", "x"),)),
               m.StepReport(3, {"loss": 0.5}), m.Files((("a/b", 0, b"\x00"),)), m.Result(ok=True, value=b"v"),
               m.Cluster({"worker": ["h:1"]}), m.Stop(), m.FilesRewind({"a": 3}), m.FeedServing("h", 5),
               m.FeedReport(1, 2, 3, 0.5, True), m.Leftovers(({"host": "h", "pid": 1, "run_id": "r", "task": "t",
                                                                "cmdline": "c", "gpus": ("0",), "used_mib": 0,
                                                                "killed": False},))]
    for msg in samples:
        wire = msgpack.unpackb(msgpack.packb(m.encode(msg), use_bin_type=True), raw=False)
        back = m.decode(wire)
        assert back == msg or m.encode(back) == m.encode(msg)
    assert m.from_json(m.to_json(m.StepReport(1, {"a": 1.0}))) == m.StepReport(1, {"a": 1.0})


def test_unauthenticated_garbage_never_reaches_the_run():
    run = start(finish_with(7))
    raw = socket.create_connection((run.control.server.host, run.control.server.port))
    raw.recv(1024)
    raw.sendall(struct.pack(">I", 5) + b"\xc1" * 5)
    assert run.wait(10) == 7
    raw.close()


class BusyBackend(FakeBackend):
    """A cluster whose slots other jobs hold (``busy``) until the test frees them; ``gone``: its
    SparkContext was stopped, so it cannot be read at all."""

    def __init__(self, script, busy: int) -> None:
        super().__init__(script, slots=2)
        self.busy, self.gone = busy, False

    def cluster(self, own_tag=None) -> ClusterView:
        if self.gone:
            raise RuntimeError("the SparkContext was stopped")
        return ClusterView(executors=(ExecutorInfo("0", "127.0.0.1", 2, ()),), total_slots=2, busy_slots=self.busy,
                           other_jobs=(f"job 1 ({self.busy} running task(s), stages [1])",) * bool(self.busy))


def waiting(run: Run) -> list[str]:
    return [e.finding.cause for e in run.events.events(FindingRaised) if e.finding.code == "waiting_for_slots"]


def waits(run: Run) -> bool:
    return run.events.wait_for(lambda evs: any(isinstance(e, FindingRaised) and e.finding.code == "waiting_for_slots"
                                               for e in evs), timeout=5)


def test_a_run_holds_its_job_back_until_other_jobs_free_the_slots():
    backend = BusyBackend(finish_with(7), busy=1)
    run = Run(backend, lambda args, ctx: None, None, 2, stop_grace_secs=0.5).start()
    assert waits(run)
    assert waiting(run) == ["waiting for 2 free task slots before submitting (1 free now): running in this "
                            "application: job 1 (1 running task(s), stages [1])"]
    assert backend.jobs == 0 and run.state is RunState.RESERVING
    backend.busy = 0
    assert run.wait(10) == 7 and backend.jobs == 1


def test_a_run_stopped_while_it_waits_for_slots_submits_nothing():
    backend = BusyBackend(finish_with(7), busy=2)
    run = Run(backend, lambda args, ctx: None, None, 2, stop_grace_secs=0.5).start()
    assert waits(run)
    run.stop(5)
    assert run.state is RunState.STOPPED and backend.jobs == 0


def test_a_run_whose_cluster_cannot_be_read_fails_instead_of_hanging():
    backend = BusyBackend(finish_with(7), busy=2)
    run = Run(backend, lambda args, ctx: None, None, 2).start()
    assert waits(run)
    backend.gone = True  # the user stopped the SparkContext while the run waited
    with pytest.raises(SparkJobError, match="cannot read the cluster's free slots: the SparkContext was stopped"):
        run.wait(5)


def test_a_node_with_a_tensorflow_older_than_the_floor_fails_the_run_at_registration_with_the_floor():
    """TensorFlow below the oldest release supported (2.14, Databricks 14.3 LTS ML's) is refused as
    the node registers, naming the version, the node and the fix, before any function runs and
    without a relaunch (every host of the cluster has the same install)."""

    def script(plan, task, cancel):
        node = FakeNode(plan, task)
        node.send(m.Register(task=task, attempt=plan.attempt, host="127.0.0.1", port=40000 + task, pid=1000 + task,
                             python="3.10.12", tensorflow="2.12.0" if task == 1 else "2.14.1"))
        node.wait_for_stop(5)
        node.close()
        return {"task": task}

    run = start(script, retries=2)
    with pytest.raises(NodeError, match=r"tensorflow 2\.12\.0 is older than 2\.14, the oldest tfos_notebook supports: "
                                        r"install tensorflow>=2\.14 .* \(found on 127\.0\.0\.1\)"):
        run.wait(10)
    assert run.attempt == 0 and run.state is RunState.FAILED


class _MarksWhenUnpickled:
    """Unpickled, it writes a file: proof that a value was unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_result_frame_altered_on_the_way_fails_the_run_at_once_and_nothing_of_it_is_unpickled(tmp_path):
    """A node's traffic passes a proxy on loopback that flips a byte of its Result frame, a pickle
    that would write a file if it were ever unpickled: the driver refuses the frame before decoding
    it, and the run fails at once, without a relaunch, saying the traffic was altered."""
    from fuzzing import TamperingProxy

    marker = tmp_path / "unpickled"
    payload = pickle.dumps(_MarksWhenUnpickled(str(marker)))

    def script(plan, task, cancel):
        if task == 0:  # the Result frame, a map whose "type" is "result" (msgpack: 0xa6 "result")
            proxy = TamperingProxy((plan.server_host, plan.server_port), "flip", holding=b"\xa6result")
            plan = types.SimpleNamespace(**{**vars(plan), "server_host": proxy.address[0],
                                            "server_port": proxy.address[1]})
        node = FakeNode(plan, task)
        assert isinstance(node.register(), m.Cluster)
        node.send(m.NodeStateReport("running", 1))
        node.send(m.Result(ok=True, value=payload if task == 0 else pickle.dumps(None), exit_code=0))
        node.wait_for_stop(5)
        node.close()
        return {"task": task}

    run = start(script, retries=2)
    with pytest.raises(NodeError, match=r"(?s)chief:0 .*the node's control connection was dropped, and nothing more from "
                                        r"it was read: frame \d+ failed its authentication: it was altered, replayed"):
        run.wait(10)
    assert run.attempt == 0 and not marker.exists()
