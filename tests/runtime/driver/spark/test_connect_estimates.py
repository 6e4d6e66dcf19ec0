"""Spark Connect's estimates without a server: slots from the conf, findings marked as estimates,
and log directories read without a JVM."""

from __future__ import annotations

import pytest

from tfos_notebook.runtime.driver.diagnosis.diagnose import Snapshot, diagnose
from tfos_notebook.runtime.driver.events.finding import blockers
from tfos_notebook.runtime.driver.spark import ExecutorInfo
from tfos_notebook.runtime.driver.spark.connect import ConnectBackend, Probe
from tfos_notebook.tensorboard.sources import files_path


class ConfOnly(ConnectBackend):
    """A Connect backend whose conf is a dict (no session)."""

    def __init__(self, conf: dict[str, str]) -> None:
        super().__init__(session=None)
        self._conf = conf

    def conf(self, key, default=None):
        return self._conf.get(key, default)


PROBE = Probe((ExecutorInfo("h1", "h1", 4), ExecutorInfo("h2", "h2", 8)), (), (), 0.0)


@pytest.mark.parametrize("conf, slots", [
    ({"spark.master": "local[3]"}, 3),
    ({"spark.master": "local"}, 1),
    ({"spark.master": "local[*]"}, 12),
    ({"spark.master": "local-cluster[2, 3, 1024]", "spark.task.cpus": "3"}, 2),
    ({"spark.master": "spark://m:7077", "spark.executor.instances": "4", "spark.executor.cores": "8"}, 32),
    ({"spark.master": "spark://m:7077", "spark.executor.instances": "4", "spark.executor.cores": "8",
      "spark.executor.resource.gpu.amount": "2", "spark.task.resource.gpu.amount": "1"}, 8),
    ({"spark.master": "yarn", "spark.task.cpus": "2"}, 6),  # nothing in the conf: the probe's cores
])
def test_slots_are_estimated_from_the_conf_else_from_the_probe(conf, slots):
    assert ConfOnly(conf)._slots(PROBE) == slots


def test_a_gang_not_started_on_estimates_is_a_warning_marked_as_an_estimate():
    snap = Snapshot(requested_tasks=3, roles=("chief:0", "worker:0", "worker:1"), total_slots=3,
                    executors=(ExecutorInfo("driver", "127.0.0.1", 3),), stalled_for=3.2, exact=False)
    [finding] = diagnose(snap)
    assert finding.code == "gang_not_started" and finding.estimated and not blockers([finding])
    assert finding.describe(evidence=False).splitlines()[0] == (
        "none of the 3 nodes has started after 3s: Spark has not scheduled the gang, which needs all its slots "
        "free at once (estimate)")
    assert diagnose(Snapshot(requested_tasks=3, total_slots=3, stalled_for=3.2)) == []  # exact: Spark's own view


def test_too_few_estimated_slots_warn_instead_of_refusing():
    [finding] = diagnose(Snapshot(requested_tasks=3, total_slots=2, exact=False))
    assert finding.code == "not_enough_slots" and finding.severity == "warning" and finding.estimated
    [exact] = diagnose(Snapshot(requested_tasks=3, total_slots=2))
    assert exact.severity == "blocker" and not exact.estimated


def test_log_dirs_are_read_as_files_where_the_driver_sees_them():
    assert files_path("file:///tmp/logs/run") == "/tmp/logs/run"
    assert files_path("dbfs:/tfos/runs/x") is None  # no /dbfs mount on this machine: the JVM's turn
    assert files_path("s3://bucket/logs") is None


def test_a_client_off_the_driver_host_is_told_it_cannot_be_reached():
    from tfos_notebook.runtime.driver.spark import DriverUnreachable

    backend = ConfOnly({"spark.master": "spark://m:7077", "spark.driver.host": "192.0.2.1"})  # TEST-NET-1
    with pytest.raises(DriverUnreachable, match=r"^the executors cannot connect to this notebook's host 192\.0\.2\.1 "
                                                r"\(this process cannot listen on 192\.0\.2\.1 \("):
        backend.check_reachable()
