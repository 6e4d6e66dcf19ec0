"""What the magics do, as plain Python functions (the magics only parse their arguments).

``train(body, options, user_ns)`` turns a cell into every node's main function and launches it;
``status_text(runs)``, ``runs_text(records)`` and ``stop_run(runs, which)`` back ``%tfos_status``,
``%tfos_runs`` and ``%tfos_stop``; ``boards.show_tensorboard(runs, which)`` backs ``%tfos_tensorboard``.
"""

from __future__ import annotations

import keyword
import os
import time
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ..cellfn import CellFunction
from ..errors import ConfigError
from ..runtime.node.child.ctx import NodeContext
from ..tracking.run import TrackedRun
from .capture import capture_cell
from .frontend import OutputTarget, choose_monitor
from .handle import TrainRun
from .runs import KernelRuns
from .session import notebook_spark
from .view import format_duration

if TYPE_CHECKING:
    from ..state.registry import RunRecord

INPUT_MODES = ("tensorflow", "spark")


@dataclass
class TrainOptions:
    """Options of ``%%tfos_train`` (see its help, ``%%tfos_train?``).

    Attributes:
        workers: nodes that train (the chief included). ps: parameter servers.
        evaluator: add one evaluator node.
        input_mode: ``tensorflow`` (nodes read their data) or ``spark`` (Spark feeds ``data``).
        data: name of a Spark DataFrame or RDD in the notebook, fed in input mode ``spark``.
        epochs: epochs to feed in input mode ``spark``; also ``args.epochs`` in the cell.
        gpus: GPUs per node. logdir, model_dir: ``ctx.log_dir`` / ``ctx.model_dir``.
        name: the run's name, also bound as a notebook variable when it is an identifier.
        reservation_timeout: seconds for every node to register.
        wait: block until the run ends. local: run the cell once here, for debugging.
        monitor: ``auto``, ``widget``, ``text`` or ``none``.
        tensorboard: start a live TensorBoard for the run, shown in the monitor.
        mlflow: log the run to MLflow: True, an experiment's name, False, or None (the
            ``TFOS_MLFLOW`` setting decides; see ``Run``).
        keras3: run ``tf.keras`` as Keras 3 on the nodes, not as tf-keras (which they run wherever
            it is installed: see ``Run``'s ``legacy_keras``).
        memory_limit: MiB of resident memory each node may reach (``Run``'s ``memory_limit_mb``).
        min_workers, replacement_grace: how a relaunch may shrink (``Run``'s of the same names).
    """

    workers: int = 2
    ps: int = 0
    evaluator: bool = False
    input_mode: str = "tensorflow"
    data: str | None = None
    epochs: int = 1
    gpus: int = 0
    logdir: str | None = None
    model_dir: str | None = None
    name: str | None = None
    reservation_timeout: float = 600.0
    wait: bool = False
    local: bool = False
    monitor: str = "auto"
    tensorboard: bool = True
    mlflow: bool | str | None = None
    keras3: bool = False
    memory_limit: float = 0.0
    min_workers: int | None = None
    replacement_grace: float = 60.0

    @property
    def num_nodes(self) -> int:
        return self.workers + self.ps + (1 if self.evaluator else 0)

    def cell_args(self) -> SimpleNamespace:
        """``args`` in the cell: these options, by name."""
        return SimpleNamespace(**asdict(self))


def _check_options(o: TrainOptions, user_ns: Mapping[str, Any]) -> Any:
    """Validate ``o`` against the notebook; returns the ``--data`` object (or None)."""
    if o.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {o.workers}")
    if o.ps < 0 or o.gpus < 0 or o.memory_limit < 0 or o.epochs < 1 or o.reservation_timeout <= 0:
        raise ConfigError("--ps, --gpus and --memory-limit must be 0 or more, --epochs and --reservation-timeout "
                          "more than 0")
    if o.input_mode not in INPUT_MODES:
        raise ConfigError(f"--input-mode must be one of {', '.join(INPUT_MODES)}, got {o.input_mode!r}")
    if o.name and o.name.isidentifier() and o.name in user_ns and not isinstance(user_ns[o.name], TrainRun):
        raise ConfigError(f"--name {o.name} would replace the notebook variable {o.name!r} "
                          f"({type(user_ns[o.name]).__name__}): choose another name")
    if o.input_mode == "tensorflow":
        if o.data:
            raise ConfigError("--data is fed only with --input-mode spark; in input mode tensorflow the cell "
                              "reads its data itself")
        return None
    if not o.data:
        raise ConfigError("--input-mode spark needs --data VAR: the Spark DataFrame or RDD to feed")
    if o.data not in user_ns:
        raise ConfigError(f"--data {o.data}: there is no variable {o.data!r} in the notebook")
    data = user_ns[o.data]
    from pyspark import RDD
    from pyspark.sql import DataFrame

    if not isinstance(data, (DataFrame, RDD)):
        raise ConfigError(f"--data {o.data}: {o.data!r} is a {type(data).__name__}, not a Spark DataFrame or RDD")
    if o.local:
        raise ConfigError("--local runs the cell once on the driver and cannot feed --data; "
                          "drop --local or use --input-mode tensorflow")
    return data


def run_local(cell: CellFunction, options: TrainOptions) -> Any:
    """Run the cell once here, as the chief of a one-node cluster (no Spark, no TF_CONFIG), and
    return its value. Exceptions propagate with the cell's lines in the traceback."""
    ctx = NodeContext(run_id=f"local-{time.strftime('%Y%m%d-%H%M%S')}", executor_id=0, job_name="chief",
                      task_index=0, cluster_spec={"chief": ["127.0.0.1:0"]}, working_dir=os.getcwd(),
                      host="127.0.0.1", spark_executor_id="driver", model_dir=options.model_dir,
                      log_dir=options.logdir)
    return cell(options.cell_args(), ctx)


def train(body: str, options: TrainOptions, user_ns: MutableMapping[str, Any], *, runs: KernelRuns | None = None,
          spark: Any = None, execution_count: int | None = None, shell: Any = None,
          say: Callable[[str], None] = print) -> Any:
    """Launch ``body`` (a cell) as the main function of every node; what ``%%tfos_train`` does.

    Args:
        body: the cell's text below the magic line; ``args`` (the options) and ``ctx`` are in scope,
            and ``return`` gives the node's value.
        options: see :class:`TrainOptions`.
        user_ns: the notebook's namespace: names the cell uses are shipped from it, ``--data`` is
            looked up in it, and the handle is bound in it under ``options.name``.
        runs: where this kernel's runs are listed (for ``%tfos_status`` / ``%tfos_stop``).
        spark: the SparkSession (default: the active one, or a local one).
        execution_count: the cell's ``In[n]``, for tracebacks. shell: the IPython shell, if any.
        say: where notes for the user go.

    Returns:
        A :class:`TrainRun` (at once, or once the run ended with ``options.wait``); with
        ``options.local``, the cell's return value.

    Raises:
        CellError: syntax error, undefined name, or a variable that cannot be shipped.
        ConfigError: impossible options. PreflightError: the cluster cannot run the nodes.
        With ``wait``: the run's error (NodeError with the cell's traceback, RunStopped...).
    """
    data = _check_options(options, user_ns)
    cell = capture_cell(body, user_ns, execution_count)
    if options.local:
        return run_local(cell, options)
    monitor = choose_monitor(options.monitor, shell)
    spark = spark or notebook_spark(options.num_nodes, say)
    run = TrackedRun(spark, cell, options.cell_args(), options.num_nodes, num_ps=options.ps,
                     eval_node=options.evaluator, log_dir=options.logdir, model_dir=options.model_dir,
                     reservation_timeout=options.reservation_timeout, gpus_per_node=options.gpus,
                     name=options.name, input_mode=options.input_mode, mlflow=options.mlflow,
                     legacy_keras=False if options.keras3 else None, memory_limit_mb=options.memory_limit,
                     min_workers=options.min_workers, replacement_grace=options.replacement_grace)
    run.start(data, options.epochs)  # with data, each node is fed its share by its own task (in-stage)
    handle = TrainRun(run, cell, monitor, OutputTarget(shell))
    if options.tensorboard:
        # Once pre-flight passed. Nothing the nodes ship before it is attached is lost: attaching
        # asks every node to send its files again from the start.
        handle.start_tensorboard()
    if runs is not None:
        runs.add(handle)
    if options.name and options.name.isidentifier() and not keyword.iskeyword(options.name):
        user_ns[options.name] = handle
    if options.wait:
        try:
            handle.wait()
        except KeyboardInterrupt:  # interrupting a blocking launch stops the run, as a local fit would
            handle.stop()
            raise
    return handle


def status_text(runs: KernelRuns) -> str:
    """One line per run of this kernel (name, run id, state, elapsed, nodes), then one per sweep
    (name, id, and its headline: trials by state, best so far)."""
    if not len(runs) and not runs.sweeps:
        return "no run was launched from this kernel yet"
    lines = []
    for r in runs:
        took = format_duration(r.elapsed)
        nodes = ", ".join(f"{n} {s}" for n, s in r.run.node_states().items())
        lines.append(f"{r.name:<20} {r.run_id:<24} {r.state:<10} {took:>8}  {nodes}")
    lines += [f"{s.name:<20} {s.run_id:<24} {s.summary()}" for s in runs.sweeps]
    return "\n".join(lines)


def runs_text(records: list[RunRecord], now: float | None = None) -> str:
    """A table of registry records, one line each: what ``%tfos_runs`` prints.

    Args:
        records: runs of the registry (``state.registry.list_runs()``), in the order to show.
        now: the time ages are counted to (default: now).
    """
    if not records:
        return "no runs on this machine yet"
    now = now or time.time()
    me = os.getpid()
    lines = [f"{'NAME':<20} {'RUN ID':<24} {'STATE':<10} {'AGE':>8} {'STEP':>7} {'LOSS':>9}  OWNER  TENSORBOARD"]
    for r in records:
        step = "" if r.step is None else str(r.step)
        loss = "" if r.loss is None else f"{r.loss:.4g}"
        owner = "here" if r.owner_pid == me else str(r.owner_pid)
        lines.append(f"{r.name:<20.20} {r.run_id:<24} {r.state:<10} {format_duration(now - r.started_at):>8} "
                     f"{step:>7} {loss:>9}  {owner:<6} {r.tensorboard_url or '-'}")
    return "\n".join(lines)


def stop_run(runs: KernelRuns, which: str | None = None, say: Callable[[str], None] = print) -> Any:
    """Stop the sweep or run named ``which`` (default: the newest sweep still going when no run of
    this kernel goes on, else the newest run still going) and return it."""
    sweep = runs.find_sweep(which)
    if sweep is not None and (which is not None or not any(not r.done for r in runs)):
        return _stop(sweep, "sweep", f"; starting a sweep named {sweep.name} again resumes it", say)
    return _stop(runs.find(which), "run", "", say)


def _stop(handle: Any, kind: str, after: str, say: Callable[[str], None]) -> Any:
    if handle.done:
        say(f"{kind} {handle.name} already {handle.state}")
        return handle
    handle.stop()
    say(f"{kind} {handle.name} {handle.state}{after}")
    return handle
