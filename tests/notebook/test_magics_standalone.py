"""%%tfos_train on the Spark standalone cluster (2 workers with fake GPU addresses)."""

from __future__ import annotations

import pytest
from nbhelpers import TRAINING_CELL, TRAINING_HELPERS, table_rows
from sparkstate import executor_ids

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_training_on_the_cluster_lists_each_node_with_its_executor_and_gpu(ip, standalone):
    ip.run_cell(TRAINING_HELPERS)
    result = ip.run_cell(f"%%tfos_train --workers 2 --gpus 1 --epochs 3 --name cluster_run --monitor widget\n{TRAINING_CELL}")
    assert result.success, result.error_in_exec
    run = ip.user_ns["cluster_run"]
    value = run.wait(300)
    assert value["accuracy"] > 0.5
    monitor = run.monitor
    assert (monitor.progress.value, monitor.progress.max) == (2, 2)
    assert "finished" in monitor.header.value
    rows = {r[0]: r for r in table_rows(monitor.tasks.get_state()["value"])[1:]}
    assert set(rows) == {"chief:0", "worker:0"}
    assert {rows[n][2] for n in rows} == executor_ids(standalone.sparkContext)  # one node per executor
    for name, (_, host, _executor, port, gpus, _memory, state, step, _loss, _rate, _wait) in rows.items():
        assert (host, state, int(step)) == ("127.0.0.1", "finished", 45), name
        assert gpus in ("0", "1") and int(port) > 0
