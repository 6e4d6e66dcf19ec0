"""Findings about the nodes and their hosts, from what the nodes report: TensorFlow and Python
versions, a node's failure, processes of earlier runs (and foreign GPU holders), a model dir the
nodes do not share. Pure functions of their arguments, like ``diagnose``."""

from __future__ import annotations

from ...host.orphans import Leftover
from ...host.paths import SHARED_STORAGE
from ...wire.errors import EXPORT_PEERS_MISSING
from ...wire.plan import node_name
from ..events.finding import BLOCKER, WARNING, Finding, tail


def version_findings(versions: tuple[tuple[str, str, str], ...], driver_versions: tuple[str, str]) -> list[Finding]:
    """Warnings about nodes without TensorFlow, and Python or TensorFlow versions that differ between
    the nodes and the driver (``versions``: ``(role:index, python, tensorflow)`` of each node)."""
    findings = []
    no_tf = [name for name, _, tf in versions if not tf]
    if no_tf:
        findings.append(Finding(
            code="tensorflow_missing",
            cause=f"TensorFlow is not installed for the Python that runs nodes {', '.join(no_tf)}",
            evidence=tuple(f"{name}: python {py}, tensorflow not found" for name, py, tf in versions if not tf),
            remedy="install tensorflow (and tf-keras) into the executors' Python (spark.pyspark.python / "
                   "PYSPARK_PYTHON), e.g. as a cluster library",
            severity=WARNING,
        ))
    pythons = {py.rsplit(".", 1)[0] for _, py, _ in versions if py}
    tfs = {tf for _, _, tf in versions if tf}
    driver_py, driver_tf = driver_versions
    if len(pythons) > 1 or (driver_py and pythons and {driver_py.rsplit(".", 1)[0]} != pythons):
        findings.append(Finding(
            code="python_version_mismatch",
            cause="the driver and the nodes run different Python versions; functions pickled on one may not load "
                  "on the other",
            evidence=(f"driver: python {driver_py}", *(f"{name}: python {py}" for name, py, _ in versions)),
            remedy="use the same Python minor version everywhere (spark.pyspark.python and "
                   "spark.pyspark.driver.python)",
            severity=WARNING,
        ))
    if len(tfs) > 1 or (driver_tf and tfs and {driver_tf} != tfs):
        findings.append(Finding(
            code="tensorflow_version_mismatch",
            cause="nodes (or the driver) have different TensorFlow versions",
            evidence=(f"driver: tensorflow {driver_tf or 'not installed'}",
                      *(f"{name}: tensorflow {tf}" for name, _, tf in versions if tf)),
            remedy="install one TensorFlow version on every executor (and on the driver if it evaluates models)",
            severity=WARNING,
        ))
    return findings


def diagnose_failure(role: str, index: int, host: str, traceback_text: str, port: int = 0) -> list[Finding]:
    """Findings that explain a node's failure from its traceback (a pure function of the text)."""
    where = f"{node_name(role, index)} on {host}"
    last = tail(traceback_text, 3)
    if "Could not start gRPC server" in traceback_text or "Failed to add port" in traceback_text:
        return [Finding(
            code="port_in_use",
            cause=f"TensorFlow on {where} could not bind its port {port or ''}".rstrip(),
            evidence=(f"{where}: {last}",),
            remedy=f"another process holds port {port} on {host} (see `ss -ltnp`); if it is a leftover of an earlier "
                   "run, kill it with %tfos_cleanup --kill; a new launch picks fresh ports",
        )]
    if "No module named 'tensorflow'" in traceback_text or (
            "tensorflow" in traceback_text and ("ImportError" in traceback_text or "ModuleNotFoundError" in traceback_text)):
        return [Finding(
            code="tensorflow_import_failed",
            cause=f"TensorFlow could not be imported on {where}",
            evidence=(f"{where}: {last}",),
            remedy="install tensorflow (and tf-keras) into the executors' Python, and check that no other folder on "
                   "PYTHONPATH shadows it",
        )]
    if f"ExportError: {EXPORT_PEERS_MISSING}" in traceback_text:
        return [Finding(
            code="export_peer_missing",
            cause=f"{where} waited at the model export for workers that never arrived: they did not call the "
                  "export, or they never left model.fit",
            evidence=(f"{where}: {last}",),
            remedy="call compat.export_saved_model(model, export_dir, is_chief) or ctx.export(model, export_dir) on "
                   "every node, not only on the chief. If every node calls it, the missing one is stuck as fit "
                   "returns (its stacks, in run.logs(), end in fit's caller): TensorFlow deadlocks when fit returns "
                   "while its input pipeline is still fetching from a Python generator (Dataset.from_generator, "
                   "TFNode.DataFeed in a generator). Let the dataset end with fit: ds.take(steps) with "
                   "steps_per_epoch=steps, or fit over ctx.dataset() without steps_per_epoch (docs/migration.md)",
        )]
    return []


def _leftover_line(x: Leftover) -> str:
    gpu = f", holding GPU {','.join(x.gpus)} ({x.used_mib} MiB)" if x.gpus else ""
    who = f"run {x.run_id} {x.task}".rstrip() if x.run_id else "not started by tfos_notebook"
    return f"{x.host} pid {x.pid} ({who}){gpu}: {x.cmdline}"


def leftover_findings(leftovers: tuple[Leftover, ...], gpus_per_node: int = 0) -> list[Finding]:
    """Findings about processes of earlier runs still alive and foreign processes holding GPUs;
    leftovers on GPUs block a launch that asks for GPUs."""
    findings = []
    ours = [x for x in leftovers if not x.foreign and not x.killed]
    if ours:
        on_gpu = [x for x in ours if x.gpus]
        findings.append(Finding(
            code="orphan_processes",
            cause=f"{len(ours)} process(es) of earlier runs are still alive"
                  + (f", {len(on_gpu)} of them holding GPU memory" if on_gpu else ""),
            evidence=tuple(_leftover_line(x) for x in ours),
            remedy="kill them with %tfos_cleanup --kill (or tfos_notebook.cleanup(sc, kill=True)), or the Kill "
                   "leftovers button in the monitor",
            severity=BLOCKER if on_gpu and gpus_per_node else WARNING,
        ))
    foreign = [x for x in leftovers if x.foreign]
    if foreign:
        findings.append(Finding(
            code="gpu_held_by_foreign_process",
            cause=f"{len(foreign)} process(es) not started by tfos_notebook hold GPU memory on the executors",
            evidence=tuple(_leftover_line(x) for x in foreign),
            remedy="they may belong to another job or user; stop them, or give this run other GPUs (Spark's "
                   "discovery script decides which addresses executors offer)",
            severity=WARNING,
        ))
    return findings


def unshared_finding(model_dir: str, unseen: list[str]) -> Finding:
    """The warning for a model dir that ``unseen`` nodes (``worker:1 on host (address)``) do not share."""
    return Finding(
        code="model_dir_not_shared",
        cause=f"the model dir {model_dir} is not shared: {len(unseen)} node(s) do not see the driver's files there",
        evidence=(f"a probe file the driver wrote into {model_dir} is missing on: {', '.join(unseen)}",),
        remedy="checkpoints stay on the chief's host: evaluation on the driver (%%tfos_evaluate) cannot read them, "
               "and a run relaunched after a lost node restarts training from scratch (ctx.restore() and "
               f"ctx.callbacks() do not resume). Use storage that every host and the driver share: {SHARED_STORAGE}",
        severity=WARNING,
    )
