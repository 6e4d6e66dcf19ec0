"""Why a launch cannot proceed: a pure function from a snapshot of the cluster to findings.

``diagnose(snapshot)`` looks at nothing but its argument, so every finding can be tested from a
hand-made snapshot without a cluster. ``preflight.snapshot`` fills a snapshot from a live cluster
through its Spark backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ctx import SHARED_STORAGE
from .orphans import Leftover
from .spark.backend import ExecutorInfo

BLOCKER = "blocker"
WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    """One diagnosis: a ``code`` for programs, the ``cause`` in words, the ``evidence`` it rests
    on, and the ``remedy``. A ``blocker`` means the launch cannot succeed as asked."""

    code: str
    cause: str
    evidence: tuple[str, ...]
    remedy: str
    severity: str = BLOCKER
    estimated: bool = False  # rests on estimated figures (Spark Connect: no scheduler state to read)

    def describe(self, head: str = "", evidence: bool = True, sep: str = "\n    ") -> str:
        """The finding as text: ``head`` and the cause, then (with ``evidence``) each evidence line
        and the fix, each after ``sep`` (by default indented lines below the cause)."""
        cause = f"{self.cause} (estimate)" if self.estimated else self.cause
        parts = [f"{head}{cause}", *(f"evidence: {e}" for e in self.evidence if evidence), f"fix: {self.remedy}"]
        return sep.join(parts)


@dataclass(frozen=True)
class Snapshot:
    """What is known about the cluster and the launch at one moment.

    Args:
        requested_tasks: barrier tasks the launch needs (one per node).
        roles: planned ``role:index`` of each task, for the evidence lines.
        total_slots: tasks the cluster can run at once for the launch's resource profile.
        busy_slots: slots held by other running jobs.
        executors: executors registered now.
        expected_executors: executors the application asked for (None when unknown).
        dynamic_allocation: whether ``spark.dynamicAllocation.enabled`` is true.
        master: the Spark master URL.
        task_gpus: ``spark.task.resource.gpu.amount`` (0 when unset).
        executor_gpus: ``spark.executor.resource.gpu.amount`` (0 when unset).
        gpus_per_node: GPUs the user asked for per node (0 for CPU-only).
        elapsed: seconds since the launch began.
        other_jobs: descriptions of the other running jobs.
        holders: what holds the cluster's cores outside this application, as the cluster manager
            tells (``SparkBackend.slot_holders``; asked only while a launch waits for slots).
        leftovers: processes of earlier runs still alive, and foreign processes holding GPUs.
        registered: ``role:index`` of the nodes registered so far (during a launch).
        stalled_for: seconds since the last registration (during a launch).
        task_errors: errors of failed attempts of the launch's Spark tasks.
        versions: ``(role:index, python, tensorflow)`` each registered node reported ("" when absent).
        driver_versions: the driver's ``(python, tensorflow)``.
        exact: False when slots and executors are estimates (Spark Connect: the session's conf and
            a probe job instead of the scheduler's state); findings resting on them say so.
    """

    requested_tasks: int
    roles: tuple[str, ...] = ()
    total_slots: int = 0
    busy_slots: int = 0
    executors: tuple[ExecutorInfo, ...] = ()
    expected_executors: int | None = None
    dynamic_allocation: bool = False
    master: str = ""
    task_gpus: float = 0
    executor_gpus: int = 0
    gpus_per_node: int = 0
    elapsed: float = 0.0
    other_jobs: tuple[str, ...] = field(default=())
    leftovers: tuple[Leftover, ...] = ()
    registered: tuple[str, ...] = ()
    stalled_for: float = 0.0
    task_errors: tuple[str, ...] = ()
    versions: tuple[tuple[str, str, str], ...] = ()
    driver_versions: tuple[str, str] = ("", "")
    exact: bool = True
    holders: tuple[str, ...] = ()

    @property
    def executors_pending(self) -> int:
        if self.expected_executors is None:
            return 0
        return max(0, self.expected_executors - len(self.executors))

    @property
    def awaiting_executors(self) -> bool:
        """Executors may still come: some the application asked for are missing, or (with no
        executor count set) none has registered and there is no slot at all, as right after a
        session starts on a cluster manager (local mode always has its slots)."""
        return bool(self.executors_pending) or (
            self.expected_executors is None and not self.executors and not self.total_slots and self.exact)


def _executor_lines(s: Snapshot) -> tuple[str, ...]:
    if not s.executors:
        return ("no executors are registered with the driver",)
    return tuple(
        f"executor {e.executor_id} on {e.host}: {e.cores} core(s)" + (f", GPUs {list(e.gpus)}" if e.gpus else "")
        for e in s.executors
    )


def diagnose(s: Snapshot) -> list[Finding]:
    """Every reason the launch described by ``s`` cannot start (or should worry the user)."""
    findings: list[Finding] = []
    if s.dynamic_allocation:
        findings.append(Finding(
            "dynamic_allocation",
            "dynamic allocation is on, and Spark refuses barrier-mode stages with it",
            ("spark.dynamicAllocation.enabled=true",),
            "start the session with spark.dynamicAllocation.enabled=false and a fixed number of "
            "executors (spark.executor.instances, or spark.cores.max on standalone)",
        ))
    if s.gpus_per_node and not s.task_gpus:
        findings.append(Finding(
            "gpus_not_configured",
            f"{s.gpus_per_node} GPU(s) per node were asked for, but Spark assigns no GPUs to tasks",
            ("spark.task.resource.gpu.amount is not set", f"spark.executor.resource.gpu.amount={s.executor_gpus}"),
            f"set spark.executor.resource.gpu.amount and spark.task.resource.gpu.amount={s.gpus_per_node} "
            "(with a GPU discovery script on the workers), or launch without GPUs",
        ))
    elif s.gpus_per_node and s.task_gpus < s.gpus_per_node:
        findings.append(Finding(
            "gpus_too_few",
            f"{s.gpus_per_node} GPU(s) per node were asked for, but each task gets {s.task_gpus:g}",
            (f"spark.task.resource.gpu.amount={s.task_gpus:g}",),
            f"set spark.task.resource.gpu.amount={s.gpus_per_node}, or ask for {s.task_gpus:g} GPU(s) per node",
        ))
    if s.requested_tasks > s.total_slots:
        if s.awaiting_executors:
            pending = s.executors_pending
            findings.append(Finding(
                "executors_pending",
                f"{pending} executor(s) the application asked for have not registered yet" if pending
                else "no executor has registered with the application yet",
                (f"{len(s.executors)} of {s.expected_executors or 'an unknown number of'} executors registered "
                 f"after {s.elapsed:.0f}s", *_executor_lines(s)),
                "nothing to do if they are starting: the launch waits for them (up to reservation_timeout); if "
                "they never come, the cluster lacks free cores or memory for them (see the master's UI)",
                WARNING,
            ))
        else:
            roles = f" ({', '.join(s.roles)})" if s.roles else ""
            findings.append(Finding(
                "not_enough_slots",
                f"the launch needs {s.requested_tasks} task slots at once but the cluster has "
                f"{s.total_slots}",
                (f"requested {s.requested_tasks} nodes{roles}",
                 f"slots for this resource profile: {s.total_slots} (executors x cores per executor / "
                 "spark.task.cpus, and GPUs per executor / spark.task.resource.gpu.amount)",
                 *_estimate_lines(s), *_executor_lines(s)),
                f"ask for at most {s.total_slots} nodes, or give the application more executors or cores "
                "(spark.executor.instances, spark.cores.max, spark.executor.cores)",
                BLOCKER if s.exact else WARNING, not s.exact,
            ))
    elif s.requested_tasks > s.total_slots - s.busy_slots and s.busy_slots:
        findings.append(Finding(
            "slots_held_by_other_jobs",
            f"{s.busy_slots} of {s.total_slots} slots are held by other running jobs, so the launch "
            "waits until they finish",
            (f"requested {s.requested_tasks} nodes, free slots now {s.total_slots - s.busy_slots}",
             *(f"running: {j}" for j in s.other_jobs)),
            "wait for those jobs, cancel them (sc.cancelJobGroup / the Spark UI), or ask for fewer nodes",
            WARNING,
        ))
    findings += leftover_findings(s.leftovers, s.gpus_per_node)
    findings += _version_findings(s)
    if s.task_errors:
        findings.append(Finding(
            "node_crashed_before_registering",
            f"{len(s.task_errors)} Spark task attempt(s) of the launch failed before their node registered",
            tuple(_tail(e) for e in s.task_errors[-3:]),
            "read the error above; a ModuleNotFoundError usually means tfos_notebook or its dependencies are "
            "not installed on the executors (install them as a cluster library)",
        ))
    if not s.exact and not s.registered and s.stalled_for and not blockers(findings):
        findings.append(Finding(
            "gang_not_started",
            f"none of the {s.requested_tasks} nodes has started after {s.stalled_for:.0f}s: Spark has not "
            "scheduled the gang, which needs all its slots free at once",
            (f"requested {s.requested_tasks} nodes; slots (estimated): {s.total_slots}", *_estimate_lines(s),
             *_executor_lines(s)),
            "not enough free slots (other jobs hold some, or the cluster has fewer than estimated), or dynamic "
            "allocation is on: stop the run, then free slots, ask for fewer nodes, or turn dynamic allocation off; "
            "Spark itself gives up only after spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures tries "
            "(about 10 minutes)",
            WARNING, True,
        ))
    if s.registered and len(s.registered) < s.requested_tasks and s.stalled_for and not blockers(findings):
        missing = [r for r in s.roles if r not in s.registered]
        findings.append(Finding(
            "registration_stalled",
            f"{len(s.registered)} of {s.requested_tasks} nodes registered; none for {s.stalled_for:.0f}s",
            (f"registered: {', '.join(s.registered)}", f"missing: {', '.join(missing)}", *_executor_lines(s)),
            "the missing nodes' tasks have not started: check the Spark UI for pending tasks and the "
            "executors' stderr; other jobs or a lost executor can hold their slots",
            WARNING,
        ))
    return findings


def slot_wait_finding(s: Snapshot, timeout: float) -> Finding:
    """Why a launch holds its barrier job back: fewer free slots than nodes, and what holds them
    (other applications, as the cluster manager tells; other jobs or runs of this application;
    executors still to come). Its cause names the first holder, so a new holder is a new finding."""
    held = (*s.holders, *(f"running in this application: {j}" for j in s.other_jobs))
    if held:
        why = held[0]
    elif s.awaiting_executors:
        why = "executors have not registered yet"
    else:
        why = "the slots are held by tasks of this application"
    return Finding(
        "waiting_for_slots",
        f"waiting for {s.requested_tasks} free task slots before submitting ({max(0, s.total_slots - s.busy_slots)} free now): {why}",
        (f"slots: {s.total_slots}, held by other jobs of this application: {s.busy_slots}", *held,
         *_executor_lines(s)),
        f"the run starts when the slots free, or fails after reservation_timeout ({timeout:.0f}s); to start sooner, "
        "stop the run or application that holds them, or ask for fewer nodes",
        WARNING,
    )


def _estimate_lines(s: Snapshot) -> tuple[str, ...]:
    if s.exact:
        return ()
    return ("slots and executors are estimates: a Spark Connect session shows no scheduler state, so they come "
            "from the session's conf and a probe job",)


def _tail(text: str, lines: int = 6) -> str:
    """The last ``lines`` meaningful lines of an error, JVM stack frames left out."""
    kept = [line.strip() for line in text.strip().splitlines()
            if line.strip() and not line.strip().startswith(("at ", "... "))][-lines:]
    return " | ".join(kept)


def _version_findings(s: Snapshot) -> list[Finding]:
    findings = []
    no_tf = [name for name, _, tf in s.versions if not tf]
    if no_tf:
        findings.append(Finding(
            "tensorflow_missing",
            f"TensorFlow is not installed for the Python that runs nodes {', '.join(no_tf)}",
            tuple(f"{name}: python {py}, tensorflow not found" for name, py, tf in s.versions if not tf),
            "install tensorflow (and tf-keras) into the executors' Python (spark.pyspark.python / "
            "PYSPARK_PYTHON), e.g. as a cluster library",
            WARNING,
        ))
    pythons = {py.rsplit(".", 1)[0] for _, py, _ in s.versions if py}
    tfs = {tf for _, _, tf in s.versions if tf}
    driver_py, driver_tf = s.driver_versions
    if len(pythons) > 1 or (driver_py and pythons and {driver_py.rsplit(".", 1)[0]} != pythons):
        findings.append(Finding(
            "python_version_mismatch",
            "the driver and the nodes run different Python versions; functions pickled on one may not load "
            "on the other",
            (f"driver: python {driver_py}", *(f"{name}: python {py}" for name, py, _ in s.versions)),
            "use the same Python minor version everywhere (spark.pyspark.python and spark.pyspark.driver.python)",
            WARNING,
        ))
    if len(tfs) > 1 or (driver_tf and tfs and {driver_tf} != tfs):
        findings.append(Finding(
            "tensorflow_version_mismatch",
            "nodes (or the driver) have different TensorFlow versions",
            (f"driver: tensorflow {driver_tf or 'not installed'}",
             *(f"{name}: tensorflow {tf}" for name, _, tf in s.versions if tf)),
            "install one TensorFlow version on every executor (and on the driver if it evaluates models)",
            WARNING,
        ))
    return findings


def diagnose_failure(role: str, index: int, host: str, traceback_text: str, port: int = 0) -> list[Finding]:
    """Findings that explain a node's failure from its traceback (a pure function of the text)."""
    where = f"{role}:{index} on {host}"
    last = _tail(traceback_text, 3)
    if "Could not start gRPC server" in traceback_text or "Failed to add port" in traceback_text:
        return [Finding(
            "port_in_use",
            f"TensorFlow on {where} could not bind its port {port or ''}".rstrip(),
            (f"{where}: {last}",),
            f"another process holds port {port} on {host} (see `ss -ltnp`); if it is a leftover of an earlier "
            "run, kill it with %tfos_cleanup --kill; a new launch picks fresh ports",
        )]
    if "No module named 'tensorflow'" in traceback_text or (
            "tensorflow" in traceback_text and ("ImportError" in traceback_text or "ModuleNotFoundError" in traceback_text)):
        return [Finding(
            "tensorflow_import_failed",
            f"TensorFlow could not be imported on {where}",
            (f"{where}: {last}",),
            "install tensorflow (and tf-keras) into the executors' Python, and check that no other folder on "
            "PYTHONPATH shadows it",
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
            "orphan_processes",
            f"{len(ours)} process(es) of earlier runs are still alive"
            + (f", {len(on_gpu)} of them holding GPU memory" if on_gpu else ""),
            tuple(_leftover_line(x) for x in ours),
            "kill them with %tfos_cleanup --kill (or tfos_notebook.cleanup(sc, kill=True)), or the Kill "
            "leftovers button in the monitor",
            BLOCKER if on_gpu and gpus_per_node else WARNING,
        ))
    foreign = [x for x in leftovers if x.foreign]
    if foreign:
        findings.append(Finding(
            "gpu_held_by_foreign_process",
            f"{len(foreign)} process(es) not started by tfos_notebook hold GPU memory on the executors",
            tuple(_leftover_line(x) for x in foreign),
            "they may belong to another job or user; stop them, or give this run other GPUs (Spark's "
            "discovery script decides which addresses executors offer)",
            WARNING,
        ))
    return findings


def blockers(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == BLOCKER]


def unshared_finding(model_dir: str, unseen: list[str]) -> Finding:
    """The warning for a model dir that ``unseen`` nodes (``worker:1 on host (address)``) do not share."""
    return Finding(
        "model_dir_not_shared",
        f"the model dir {model_dir} is not shared: {len(unseen)} node(s) do not see the driver's files there",
        (f"a probe file the driver wrote into {model_dir} is missing on: {', '.join(unseen)}",),
        "checkpoints stay on the chief's host: evaluation on the driver (%%tfos_evaluate) cannot read them, and a "
        "run relaunched after a lost node restarts training from scratch (ctx.restore() and ctx.callbacks() do not "
        f"resume). Use storage that every host and the driver share: {SHARED_STORAGE}",
        WARNING,
    )
