"""The size of a relaunch (``Supervisor._resize``) against a cluster view given by hand: every node
when the slots are there, fewer down to ``min_workers`` after the grace, a finding either way.
(The standalone tests of test_decommission.py run the same on a real cluster.)"""

from __future__ import annotations

from types import SimpleNamespace

from tfos_notebook.runtime.driver.run.lifecycle import RunState
from tfos_notebook.runtime.driver.run.supervised import AttemptLimits
from tfos_notebook.runtime.driver.run.supervisor import Supervisor
from tfos_notebook.runtime.driver.spark.backend import ClusterView

ROLES = [("ps", 0), ("chief", 0), ("worker", 0), ("worker", 1), ("worker", 2)]


def resized(free: int, min_workers: int, exact: bool = True) -> tuple[list, list]:
    findings: list = []
    run = SimpleNamespace(
        name="r", full_roles=list(ROLES), roles=list(ROLES), state=RunState.RESERVING,
        limits=AttemptLimits(reservation_timeout=30, retries=0, stop_grace_secs=1, min_workers=min_workers,
                             replacement_grace=0.3),
        lifecycle=SimpleNamespace(job_group="g"),
        backend=SimpleNamespace(cluster=lambda tag: ClusterView(executors=(), total_slots=free, exact=exact)),
        diagnosis=SimpleNamespace(publish=findings.extend))
    Supervisor._resize(run)
    return run.roles, [f.code for f in findings]


def test_every_node_when_the_slots_are_there_or_min_workers_is_not_set():
    assert resized(free=5, min_workers=2) == (ROLES, [])
    assert resized(free=2, min_workers=0) == (ROLES, [])  # never shrinks: the reservation waits as always
    assert resized(free=2, min_workers=2, exact=False) == (ROLES, [])  # an estimate (Spark Connect): no shrinking


def test_fewer_workers_after_the_grace_down_to_min_workers():
    assert resized(free=4, min_workers=2) == (ROLES[:4], ["run_resized"])  # the ps and 3 training nodes
    assert resized(free=3, min_workers=2) == (ROLES[:3], ["run_resized"])
    assert resized(free=2, min_workers=2) == (ROLES[:3], ["below_min_workers"])  # waits for a third slot
