"""``%tfos_diagnose`` and ``%tfos_cleanup``: findings and leftover processes on demand, as text."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..runtime.driver.diagnosis.cleanup import scan_cluster
from ..runtime.driver.events.finding import Finding
from ..runtime.host.orphans import Leftover

if TYPE_CHECKING:
    from ..runtime.driver.run.launch import Run


def format_findings(findings: Iterable[Finding]) -> str:
    """Findings as readable lines: severity and cause, evidence, fix."""
    return "\n".join(f.describe(f"[{f.severity}] ") for f in findings)


def diagnose_text(run: Run) -> str:
    """What is known about why ``run`` is stuck or failed: the findings raised so far and a fresh
    diagnosis of the cluster."""
    findings = run.diagnose()
    head = f"run {run.name} ({run.run_id}) {run.state}"
    if not findings:
        return f"{head}: no findings; the cluster has the slots and settings this run needs"
    return f"{head}:\n{format_findings(findings)}"


def cleanup_report(spark: Any, exclude_runs: set[str], kill: bool = False, timeout: float = 60.0) -> str:
    """Leftover processes of earlier runs (and foreign GPU holders) on every executor host of
    ``spark`` (a SparkContext, session or Spark backend), one line each; ``kill`` terminates the leftovers, except those of ``exclude_runs``
    (run ids), and never foreign processes. ``timeout``: seconds for the scan's Spark job."""
    found = scan_cluster(spark, exclude_runs=exclude_runs, kill=kill, timeout=timeout)
    if not found:
        return "no leftover processes on the executors"
    return "\n".join(_leftover_line(x) for x in found)


def _leftover_line(x: Leftover) -> str:
    owner = f"run {x.run_id} {x.task}".rstrip() if x.run_id else "foreign (not started by tfos_notebook)"
    gpus = f" GPU {','.join(x.gpus)} {x.used_mib} MiB" if x.gpus else ""
    state = " killed" if x.killed else ""
    return f"{x.host} pid {x.pid}: {owner}{gpus}{state}  {x.cmdline[:120]}"
