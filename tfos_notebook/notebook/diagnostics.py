"""``%tfos_diagnose`` and ``%tfos_cleanup``: findings and leftover processes on demand, as text."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..runtime.diagnose import Finding
from ..runtime.orphans import Leftover, scan_cluster

if TYPE_CHECKING:
    from .api import KernelRuns


def format_findings(findings: Iterable[Finding]) -> str:
    """Findings as readable lines: cause, evidence, fix."""
    lines = []
    for f in findings:
        lines.append(f"[{f.severity}] {f.cause}")
        lines += [f"    evidence: {e}" for e in f.evidence]
        lines.append(f"    fix: {f.remedy}")
    return "\n".join(lines)


def diagnose_text(runs: KernelRuns, which: str | None = None) -> str:
    """What is known about why run ``which`` (default: the newest still going) is stuck or failed:
    the findings raised so far and a fresh diagnosis of the cluster."""
    run = runs.find(which)
    findings = run.run.diagnose()
    head = f"run {run.name} ({run.run_id}) {run.state}"
    if not findings:
        return f"{head}: no findings; the cluster has the slots and settings this run needs"
    return f"{head}:\n{format_findings(findings)}"


def cleanup_text(sc, runs: KernelRuns, kill: bool = False, timeout: float = 60.0) -> str:
    """Leftover processes of earlier runs (and foreign GPU holders) on every executor host;
    ``kill`` terminates the leftovers. Runs of this kernel that are still going are left alone."""
    return cleanup_report(sc, {r.run_id for r in runs if not r.done}, kill, timeout)


def cleanup_report(sc, exclude_runs: set[str], kill: bool = False, timeout: float = 60.0) -> str:
    """Scan (and with ``kill``, clean) every executor host; one line per process found."""
    found = scan_cluster(sc, exclude_runs=exclude_runs, kill=kill, timeout=timeout)
    if not found:
        return "no leftover processes on the executors"
    return "\n".join(_leftover_line(x) for x in found)


def _leftover_line(x: Leftover) -> str:
    owner = f"run {x.run_id} {x.task}".rstrip() if x.run_id else "foreign (not started by tfos_notebook)"
    gpus = f" GPU {','.join(x.gpus)} {x.used_mib} MiB" if x.gpus else ""
    state = " killed" if x.killed else ""
    return f"{x.host} pid {x.pid}: {owner}{gpus}{state}  {x.cmdline[:120]}"
