"""A notebook executed headless by nbclient (no widget frontend): the monitor falls back to text."""

from __future__ import annotations

import re

import nbformat
import pytest
from nbclient import NotebookClient

from tfos_notebook.notebook.text import STEP_EVERY_SECONDS

pytestmark = [pytest.mark.slow, pytest.mark.spark]

CHATTY_CELL = """%%tfos_train --workers 2 --name nb_run
import time
for i in range(120):
    print("chatty line", i)
    ctx.report(i, loss=1.0 / (i + 1))
    time.sleep(0.05)
return {"steps": 120}
"""

FAILING_CELL = """%%tfos_train --workers 2 --wait
x = 2
raise ValueError(f"no data for {x} workers")
"""


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_headless_notebook_prints_concise_progress_lines_and_errors(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext tfos_notebook"),
        nbformat.v4.new_code_cell(CHATTY_CELL),
        nbformat.v4.new_code_cell("nb_run.wait()"),
        nbformat.v4.new_code_cell(FAILING_CELL, metadata={"tags": ["raises-exception"]}),
    ]
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    launch, wait, failing = nb.cells[1], nb.cells[2], nb.cells[3]

    for cell in nb.cells:
        for output in cell.outputs:
            assert "application/vnd.jupyter.widget-view+json" not in output.get("data", {})
    assert "[tfos] no active SparkSession: started a local one (local[" in _text(launch)
    # the handle is the cell's result; monitor lines may follow it (they are written by a thread)
    [shown] = [o for o in launch.outputs if o.output_type == "execute_result"]
    assert re.match(r"run nb_run \(\S+\): (reserving|running)", shown.data["text/plain"])

    progress = _text(launch) + _text(wait)
    assert "[tfos] nb_run: reserved 2/2" in progress
    # each node's states, as (node, state): the nodes of one state on one line, or on more when
    # their states reach the kernel apart; each node in each state once
    states = [line for line in progress.splitlines() if re.search(r"nb_run: (chief|worker):\d", line)]
    named = [(node, line.rsplit(" ", 1)[1]) for line in states
             for node in line.split("nb_run: ", 1)[1].rsplit(" ", 1)[0].split(", ")]
    assert len(named) == len(set(named)), progress
    assert sorted(node for node, state in named if state == "running") == ["chief:0", "worker:0"], progress
    assert re.search(r"\[tfos\] nb_run: finished in 0:\d\d \(step 119  loss 0.008333\); result: \{'steps': 120\}",
                     _text(wait))
    assert wait.outputs[-1].data["text/plain"] == "{'steps': 120}"
    assert "chatty line" not in progress
    # No flood: 8 lines a run always prints (the local session, launching, reserved x2, cluster
    # ready, TensorBoard, run finished, its throughput), the state lines above, and the periodic
    # ones (a step line and a pace line, each at most every STEP_EVERY_SECONDS) bounded by how long
    # the run took: 6 s of steps at 20 a second, longer on a busy machine
    took = int(re.search(r"finished in 0:(\d\d)", _text(wait)).group(1))
    periodic = [line for line in progress.splitlines() if re.search(r"nb_run: (step \d+ |[\d.]+ steps/s · elapsed)", line)]
    assert len(progress.splitlines()) - len(periodic) - len(states) <= 8, progress
    assert len(periodic) <= 2 * (took // STEP_EVERY_SECONDS + 1), progress

    error = next(o for o in failing.outputs if o.output_type == "error")
    assert error.ename == "NodeError"
    rendered = "\n".join(error.traceback)
    assert 'File "<tfos_train In[4]>", line 3, in tfos_train_cell' in rendered
    assert "ValueError: no data for 2 workers" in rendered
    assert "failed after" in _text(failing)
