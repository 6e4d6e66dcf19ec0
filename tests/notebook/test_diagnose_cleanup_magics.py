"""%tfos_diagnose, %tfos_cleanup and the monitor's Kill leftovers button, on local[2] Spark with
real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tfos_notebook.notebook import Monitor
from tfos_notebook.notebook.diagnostics import cleanup_report
from tfos_notebook.runtime.driver.events import FindingRaised, RunFinished
from tfos_notebook.runtime.driver.events.finding import Finding

FAKE_RUN = "20260101-000000-left01"


def leftover_process() -> subprocess.Popen:
    """A process marked as a node process of a run that has no node any more."""
    env = dict(os.environ, TFOS_RUN_ID=FAKE_RUN, TFOS_TASK="worker:0")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env)
    time.sleep(0.3)
    return proc


def test_diagnose_shows_why_a_run_failed(ip, local_spark, capsys):
    result = ip.run_cell("%%tfos_train --workers 2 --reservation-timeout 0.01 --no-tensorboard --monitor none "
                         "--name stuck\nreturn 1")
    assert result.success, result.error_in_exec
    run = ip.user_ns["stuck"]
    assert run.run.events.wait_for(lambda evs: any(isinstance(e, RunFinished) for e in evs), timeout=60)
    capsys.readouterr()
    ip.run_line_magic("tfos_diagnose", "stuck")
    out = capsys.readouterr().out
    assert out.startswith("run stuck (") and "failed" in out.splitlines()[0]
    assert "did not register within 0s" in out and "fix: check the executors' stderr" in out


def test_cleanup_lists_and_kills_leftovers_on_the_executors(ip, local_spark, capsys):
    proc = leftover_process()
    try:
        ip.run_line_magic("tfos_cleanup", "")
        listed = capsys.readouterr().out
        assert f"pid {proc.pid}: run {FAKE_RUN} worker:0" in listed and "killed" not in listed
        assert proc.poll() is None
        ip.run_line_magic("tfos_cleanup", "--kill")
        killed = capsys.readouterr().out
        assert f"pid {proc.pid}: run {FAKE_RUN} worker:0" in killed and "killed" in killed
        assert proc.wait(10) is not None
    finally:
        proc.kill()
        proc.wait()


def test_the_monitor_offers_to_kill_leftovers_when_a_finding_names_them(local_spark):
    proc = leftover_process()
    try:
        monitor = Monitor("r", FAKE_RUN, on_stop=lambda: None,
                          on_cleanup=lambda: cleanup_report(local_spark.sparkContext, set(), kill=True))
        assert monitor.cleanup_button.layout.display == "none"
        finding = Finding(code="orphan_processes", cause="1 process(es) of earlier runs are still alive",
                          evidence=("...",), remedy="kill them")
        monitor.update([FindingRaised(FAKE_RUN, finding=finding)])
        assert monitor.cleanup_button.layout.display == ""
        monitor.cleanup_button.click()
        deadline = time.monotonic() + 60
        while "killed" not in monitor.cleanup_result.value and time.monotonic() < deadline:
            time.sleep(0.2)
        assert f"pid {proc.pid}: run {FAKE_RUN} worker:0" in monitor.cleanup_result.value
        assert proc.wait(10) is not None
    finally:
        proc.kill()
        proc.wait()
