"""The decommission checkpoint's agreement, each side alone: a node's ``SavePoint`` (the training
loop's stop at a step boundary) fed orders by hand, and the driver's ``Decommission`` with nodes on
fake connections (no Spark, no TensorFlow: the end-to-end runs are in test_decommission.py)."""

from __future__ import annotations

import threading
import time

import pytest

from tfos_notebook.runtime.driver.events.stream import EventStream
from tfos_notebook.runtime.driver.run.coordinator import Coordinator
from tfos_notebook.runtime.driver.run.decommission import Decommission
from tfos_notebook.runtime.node.child.savepoint import Preempted, SavePoint
from tfos_notebook.runtime.wire import messages as m
from tfos_notebook.runtime.wire.states import NodeState


def test_a_boundary_without_notice_returns_at_once_and_saves_nothing():
    sent, saves = [], []
    point = SavePoint(sent.append)
    for step in range(1, 1001):
        point.boundary(step, lambda s=step: saves.append(s))
    assert sent == [] and saves == []


def test_the_first_boundary_after_the_notice_waits_for_the_driver_then_saves_at_the_agreed_step():
    sent, saves = [], []
    point = SavePoint(sent.append)
    point.order({"kind": "save_soon", "notice": "executor 1 is decommissioning"})

    def driver():  # answers the boundary as the driver does: the step, then the go once acknowledged
        while not sent:
            time.sleep(0.01)
        point.order({"kind": "save_at", "step": sent[0].step + 1})
        point.order({"kind": "save_go"})

    threading.Thread(target=driver, daemon=True).start()
    point.boundary(7, lambda: saves.append(7))  # held until the go, then goes on: 7 is not the step
    assert sent == [m.AtBoundary(7), m.SaveAtSeen(8)] and saves == []
    with pytest.raises(Preempted, match="step 8"):  # saves, says so, and the function ends
        point.boundary(8, lambda: saves.append(8) or "/model/backup")
    assert saves == [8] and sent[-1] == m.Saved(8, "/model/backup")


class FakeConn:
    def __init__(self) -> None:
        self.attrs: dict = {}
        self.sent: list = []

    def send(self, msg: dict) -> None:
        self.sent.append(m.decode(msg))

    def close(self) -> None:
        pass


class Hooks:
    def ending(self) -> bool:
        return False


def test_the_driver_names_the_step_lets_go_once_every_node_knows_it_and_ends_the_attempt_once_all_saved():
    coord = Coordinator("r1", [("chief", 0), ("worker", 0), ("ps", 0)], 0, EventStream(), threading.RLock(), Hooks())
    for nd in coord.nodes:
        nd.conn, nd.state, nd.executor_id = FakeConn(), NodeState.RUNNING, f"e{nd.task}"
    chief, worker, ps = coord.nodes
    saved, findings = [], []
    decommission = Decommission(coord, coord.events, findings.extend, lambda *a: saved.append(a))

    class Backend:
        def decommissioning(self, ids):
            return {"e1": "10.0.0.2"} if "e1" in ids else {}

    decommission.poll(Backend(), time.monotonic())
    assert all(nd.conn.sent == [m.SaveSoon(decommission.notice)] for nd in coord.nodes)
    assert "executor e1 on 10.0.0.2 (nodes worker:0) is decommissioning" in decommission.notice
    assert [f.code for f in findings] == ["executor_decommissioning"]
    decommission.handle(worker, m.AtBoundary(40))  # the first boundary names 41 for everyone
    assert all(nd.conn.sent[-1] == m.SaveAt(41) for nd in coord.nodes)
    decommission.handle(chief, m.AtBoundary(40))
    for nd in (chief, worker):
        decommission.handle(nd, m.SaveAtSeen(41))
    assert m.SaveGo() not in worker.conn.sent  # the ps has not acknowledged yet
    decommission.handle(ps, m.SaveAtSeen(41))
    assert chief.conn.sent[-1] == m.SaveGo() and worker.conn.sent[-1] == m.SaveGo()
    assert m.SaveGo() not in ps.conn.sent  # it was never held
    decommission.handle(chief, m.Saved(41, "/model/backup"))
    assert saved == []  # the worker has not saved yet
    decommission.handle(worker, m.Saved(41, ""))
    assert len(saved) == 1 and saved[0][:2] == (41, "/model/backup")
