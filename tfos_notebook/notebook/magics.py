"""``%%tfos_train``, ``%%tfos_sweep``, ``%%tfos_evaluate``, ``%tfos_status``, ``%tfos_runs``, ``%tfos_stop``,
``%tfos_tensorboard``, ``%tfos_profile``, ``%tfos_diagnose``, ``%tfos_cleanup`` and ``%tfos_config``:
argument parsers over :mod:`.api`, :mod:`.boards`, :mod:`.evaluate`, the runs registry (``state/registry.py``),
:mod:`.diagnostics`, :mod:`.config` and :mod:`.sweeps`.

Loaded with ``%load_ext tfos_notebook``. Errors a user can meet are shown as one message, without
the magic's own traceback.
"""

from __future__ import annotations

import importlib
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ..errors import ConfigError, TFOSError
from ..runtime.driver.spark import active_backend
from ..state import registry
from . import api, boards, config, diagnostics, evaluate, sweeps
from .evalcell import evaluation_cell
from .evalmonitor import EvaluationMonitor
from .frontend import OutputTarget, choose_monitor
from .runs import KernelRuns


def _concise(error: TFOSError) -> TFOSError:
    """Make IPython show ``error`` as its type and message only (no traceback through the magic)."""
    error._render_traceback_ = lambda: [f"{type(error).__name__}: {error}"]
    return error


@magics_class
class TFOSMagics(Magics):
    """The magics of one IPython shell; ``runs`` lists the runs launched from it."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.runs = KernelRuns()

    @magic_arguments()
    @argument("--workers", type=int, default=2, help="nodes that train, the chief included (default 2)")
    @argument("--ps", type=int, default=0, help="parameter-server nodes (default 0)")
    @argument("--evaluator", action="store_true", help="add an evaluator node")
    @argument("--input-mode", choices=api.INPUT_MODES, default="tensorflow",
              help="tensorflow: the cell reads its data; spark: Spark feeds --data to the nodes")
    @argument("--data", metavar="VAR", help="a Spark DataFrame or RDD in the notebook, fed in input mode spark")
    @argument("--epochs", type=int, default=1, help="epochs of --data to feed; also args.epochs in the cell")
    @argument("--gpus", type=int, default=0, help="GPUs per node, from Spark's task resources (default 0)")
    @argument("--logdir", help="TensorBoard log dir, ctx.log_dir on the nodes")
    @argument("--model-dir", help="model/checkpoint dir, ctx.model_dir on the nodes")
    @argument("--name", help="name of the run; also a notebook variable holding its handle")
    @argument("--reservation-timeout", type=float, default=600.0,
              help="seconds for every node to register before the run fails with a diagnosis (default 600)")
    @argument("--wait", action="store_true", help="block until the run ends (the Stop button cannot work then; "
              "interrupt the kernel to stop)")
    @argument("--local", action="store_true", help="run the cell once here, as a one-node chief, for debugging")
    @argument("--monitor", choices=("auto", "widget", "text", "none"), default="auto",
              help="the live monitor: a widget, text lines, or nothing (auto: widget where a widget frontend "
                   "runs the cell, else text; env TFOS_MONITOR overrides auto)")
    @argument("--mlflow", nargs="?", const=True, default=None, metavar="EXPERIMENT",
              help="log the run as one MLflow run, from the driver (in EXPERIMENT, or the current experiment; "
                   "inside an active MLflow run, as its child); by default on Databricks only "
                   "(%%tfos_config mlflow on|off|auto, env TFOS_MLFLOW)")
    @argument("--no-mlflow", dest="mlflow", action="store_const", const=False, help="do not log the run to MLflow")
    @argument("--keras3", action="store_true",
              help="run tf.keras as Keras 3 on the nodes (default: tf-keras where installed, since Keras 3's "
                   "multi-worker fit is broken upstream)")
    @argument("--memory-limit", type=float, default=0.0, metavar="MIB",
              help="resident memory (MiB) each node's process may reach before it is stopped with the reason "
                   "(default: spark.executor.pyspark.memory where set, else none; a node that grows while its "
                   "host runs out of memory is stopped anyway)")
    @argument("--min-workers", type=int, default=None, metavar="N",
              help="after an executor decommissions (a spot node taken away) the run resumes from the checkpoint "
                   "its nodes saved; with fewer free slots than nodes it may resume with as few as N training "
                   "nodes (default: all of them, waiting for a replacement)")
    @argument("--replacement-grace", type=float, default=60.0, metavar="SECS",
              help="how long a relaunch waits for a replacement executor before it shrinks to --min-workers "
                   "(default 60)")
    @argument("--no-tensorboard", dest="tensorboard", action="store_false",
              help="start no TensorBoard for the run (by default one starts with it, shown in the monitor, "
                   "and stays up until %%tfos_tensorboard RUN --stop or the kernel exits)")
    @cell_magic
    def tfos_train(self, line: str, cell: str) -> Any:
        """Run the cell as the main function of every node of a TensorFlow cluster on Spark.

        The cell runs on every node with ``ctx`` (job_name, task_index, cluster_spec, report(step,
        loss=...), ...) and ``args`` (these options) in scope; ``return`` gives the node's value
        (the chief's is the run's result). Names the cell uses from the notebook (functions,
        classes, small objects) are shipped with it. The magic returns at once with a run handle
        (``_``, and the variable ``--name``): ``wait()``, ``stop()``, ``state``, ``result``,
        ``events``, ``logs()``, ``tensorboard_url``.
        """
        options = api.TrainOptions(**vars(parse_argstring(self.tfos_train, line)))
        # prompt_count is this cell's In[n] whichever IPython version numbers it (9 counts before running)
        try:
            return api.train(cell, options, self.shell.user_ns, runs=self.runs,
                             execution_count=self.shell.displayhook.prompt_count, shell=self.shell)
        except TFOSError as e:
            raise _concise(e) from None

    @magic_arguments()
    @argument("--space", required=True, metavar="VAR",
              help="a dict in the notebook: name -> [choices], (low, high), (low, high, 'log'), (low, high, step), "
                   "an optuna distribution, or a fixed value; each becomes args.<name> in the trial")
    @argument("--trials", type=int, default=10, help="trials to run (finished, pruned or failed; default 10)")
    @argument("--parallel", type=int, default=None,
              help="most trials at once (default: as many as the cluster's task slots hold)")
    @argument("--workers", type=int, default=2, help="training nodes of each trial, the chief included (default 2)")
    @argument("--metric", default="loss", help="what the chief reports, ctx.report(step, NAME=value) or Keras's "
              "epoch logs through ctx.callbacks() (default loss)")
    @argument("--maximize", action="store_true", help="maximize the metric (default: minimize)")
    @argument("--sampler", choices=("tpe", "random", "grid"), default="tpe", help="Optuna's sampler (default tpe)")
    @argument("--pruner", choices=("median", "asha", "none"), default="median",
              help="stops poor trials early from the metric at each report (default median)")
    @argument("--seed", type=int, default=None, help="the sampler's seed")
    @argument("--name", help="the sweep's name (its study's: a sweep started again under this name resumes); "
              "also a notebook variable holding its handle")
    @argument("--epochs", type=int, default=1, help="args.epochs in the cell")
    @argument("--gpus", type=int, default=0, help="GPUs per node, from Spark's task resources (default 0)")
    @argument("--logdir", help="each trial's TensorBoard logs go under LOGDIR/trial-NNN")
    @argument("--model-dir", help="each trial's checkpoints go under MODEL_DIR/trial-NNN")
    @argument("--reservation-timeout", type=float, default=600.0, help="as for %%tfos_train (default 600)")
    @argument("--mlflow", nargs="?", const=True, default=None, metavar="EXPERIMENT",
              help="log the sweep as one MLflow run with a child run per trial (default as for %%tfos_train)")
    @argument("--no-mlflow", dest="mlflow", action="store_const", const=False, help="do not log to MLflow")
    @argument("--keras3", action="store_true", help="run tf.keras as Keras 3 on the nodes")
    @argument("--monitor", choices=("auto", "widget", "text", "none"), default="auto", help="the live monitor")
    @argument("--no-tensorboard", dest="tensorboard", action="store_false",
              help="start no TensorBoard for the sweep (by default one serves every trial as a run)")
    @argument("--wait", action="store_true", help="block until the sweep ends")
    @cell_magic
    def tfos_sweep(self, line: str, cell: str) -> Any:
        """Search hyperparameters with trials that are distributed runs of the cell, several at once.

        The cell runs on every node of each trial as in ``%%tfos_train``, with the trial's parameters
        on ``args`` (``args.lr``...); the chief reports ``--metric`` and Optuna's pruner stops poor
        trials early. Returns at once with a sweep handle (``wait()`` gives the best trial,
        ``stop()``, ``best``, ``study``); ``%tfos_stop NAME`` stops it and a sweep started again under
        the same ``--name`` resumes.
        """
        options = sweeps.SweepOptions(**vars(parse_argstring(self.tfos_sweep, line)))
        try:
            return sweeps.sweep_cell(cell, options, self.shell.user_ns, runs=self.runs,
                                     execution_count=self.shell.displayhook.prompt_count, shell=self.shell)
        except TFOSError as e:
            raise _concise(e) from None

    @magic_arguments()
    @argument("setting", nargs="?", help="mlflow or monitor (none: list the settings)")
    @argument("value", nargs="?", help="the setting's new value for the runs this kernel starts")
    @line_magic
    def tfos_config(self, line: str = "") -> None:
        """Show the kernel's settings, or set one: ``%tfos_config mlflow off`` (each is an environment
        variable, read when a run starts: TFOS_MLFLOW, TFOS_MONITOR)."""
        a = parse_argstring(self.tfos_config, line)
        try:
            if a.setting is None:
                print(config.config_text())
            elif a.value is None:
                raise ConfigError(f"%tfos_config {a.setting} needs a value, e.g. %tfos_config mlflow off")
            else:
                print(config.set_config(a.setting, a.value))
        except TFOSError as e:
            raise _concise(e) from None

    @line_magic
    def tfos_status(self, line: str = "") -> None:
        """List the runs and sweeps launched from this kernel and their state."""
        print(api.status_text(self.runs))

    @magic_arguments()
    @argument("--active", action="store_true", help="only runs still reserving or running")
    @argument("--stop", metavar="RUN", help="ask the kernel that owns RUN (name or run id) to stop it")
    @line_magic
    def tfos_runs(self, line: str = "") -> None:
        """List the runs of every kernel on this machine (the runs registry): state, step, loss, owner
        process and TensorBoard URL; a run whose kernel died before it ended shows as ``lost``."""
        a = parse_argstring(self.tfos_runs, line)
        try:
            if a.stop:
                record = registry.request_stop(a.stop)
                print(f"[tfos] asked kernel {record.owner_pid} to stop run {record.name}")
                return
            records = [r for r in registry.list_runs() if not (a.active and r.ended)]
            print(api.runs_text(records))
        except TFOSError as e:
            raise _concise(e) from None

    @magic_arguments()
    @argument("run", help="name or run id of a run of any kernel on this machine (see %%tfos_runs)")
    @argument("--every", type=float, default=10.0, help="seconds between looks for new checkpoints (default 10)")
    @argument("--name", default="eval", help="the TensorBoard run the curves appear as (default eval)")
    @argument("--settle", type=float, default=2.0,
              help="seconds a checkpoint file must stay unchanged before it is read, when no TensorFlow "
                   "'checkpoint' state file names it (default 2)")
    @argument("--max-failures", type=int, default=3,
              help="failures of the cell in a row after which the evaluation stops (default 3)")
    @argument("--latest-only", action="store_true",
              help="while the run goes on, evaluate only the newest new checkpoint (for slow evaluations)")
    @cell_magic
    def tfos_evaluate(self, line: str, cell: str) -> Any:
        """Evaluate each checkpoint of a run as it appears, here in this kernel, and draw the metrics
        in the run's TensorBoard as run ``eval`` beside its training curves.

        The cell runs once per new checkpoint of the run's model directory, oldest first, with
        ``checkpoint`` (``.path``, ``.step``, ``.restore(model)``) and ``step`` in scope and the
        notebook's names visible; it returns a dict of numbers, written as scalars at ``step``::

            %%tfos_evaluate digits
            model = checkpoint.restore(build_model())
            loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
            return {"loss": loss, "accuracy": accuracy}

        Returns at once with an ``Evaluation`` handle (``wait()``, ``stop()``, ``state``,
        ``results``, ``failures``); a line per checkpoint follows this cell. It ends once the run
        has ended and its last checkpoint is evaluated. A cell that raises is reported for that
        checkpoint and the next one is evaluated; ``--max-failures`` in a row stop it.
        """
        a = parse_argstring(self.tfos_evaluate, line)
        monitor = EvaluationMonitor() if choose_monitor("auto", self.shell) == "widget" else None
        try:
            fn = evaluation_cell(cell, self.shell.user_ns, self.shell.displayhook.prompt_count)
            evaluation = evaluate.evaluate_run(a.run, fn, every=a.every, name=a.name, settle=a.settle,
                                               max_failures=a.max_failures, latest_only=a.latest_only,
                                               say=monitor.say if monitor else print,
                                               target=OutputTarget(self.shell))
        except TFOSError as e:
            raise _concise(e) from None
        if monitor is not None:
            evaluation.monitor, monitor.evaluation = monitor, evaluation
            monitor.refresh()
        return evaluation

    @magic_arguments()
    @argument("run", nargs="?", help="name or id of a run or a sweep (default: the newest one still going)")
    @line_magic
    def tfos_stop(self, line: str = "") -> None:
        """Stop a run (cancel its Spark job group, kill its node processes) or a sweep (its running
        trials too; a sweep started again under its name resumes)."""
        which = parse_argstring(self.tfos_stop, line).run
        try:
            api.stop_run(self.runs, which)
        except TFOSError as e:
            raise _concise(e) from None

    @magic_arguments()
    @argument("target", nargs="?", metavar="RUN|LOGDIR",
              help="a run of this kernel (name or run id; default: the newest run), or a log directory: a local "
                   "path, a volume (/Volumes/...) or a URI (hdfs://, dbfs:/, s3a://, file://...)")
    @argument("--stop", action="store_true", help="stop that TensorBoard")
    @argument("--display", choices=("auto", "widget", "text"), default="auto",
              help="a panel widget or the URL as text (auto: as the monitor chooses)")
    @line_magic
    def tfos_tensorboard(self, line: str = "") -> Any:
        """Show a live TensorBoard for a run of this kernel (starting one if it has none) or for any log
        directory; ``--stop`` stops it. It runs until stopped or the kernel exits."""
        a = parse_argstring(self.tfos_tensorboard, line)
        try:
            return boards.show_tensorboard(self.runs, a.target, stop=a.stop, display=a.display, shell=self.shell)
        except TFOSError as e:
            raise _concise(e) from None


    @magic_arguments()
    @argument("run", help="name or run id of a running run of this kernel")
    @argument("--seconds", type=float, help="record this many seconds (default 5)")
    @argument("--steps", type=int, help="record this many training steps instead (needs ctx.callbacks() or "
              "ctx.report(...) on the nodes)")
    @argument("--nodes", help="the nodes to profile, role:index separated by commas (default: every running node)")
    @line_magic
    def tfos_profile(self, line: str = "") -> None:
        """Record a TensorFlow profiler trace of the running training on its nodes, without stopping
        it; the traces open in the Profile tab of the run's TensorBoard, one host per node. Returns
        once every trace is there (the capture's length and a few seconds)."""
        a = parse_argstring(self.tfos_profile, line)
        try:
            run = self.runs.find(a.run)
            nodes = [n.strip() for n in a.nodes.split(",") if n.strip()] if a.nodes else None
            if a.seconds is not None and a.steps is not None:
                raise ConfigError("give --seconds or --steps, not both")
            print(run.profile_text(run.profile(seconds=a.seconds, steps=a.steps, nodes=nodes)))
        except TFOSError as e:
            raise _concise(e) from None

    @magic_arguments()
    @argument("run", nargs="?", help="name or run id (default: the newest run still going)")
    @line_magic
    def tfos_diagnose(self, line: str = "") -> None:
        """Why a run is stuck or failed: its findings so far and a fresh diagnosis of the cluster."""
        which = parse_argstring(self.tfos_diagnose, line).run
        try:
            print(diagnostics.diagnose_text(self.runs.find(which).run))
        except TFOSError as e:
            raise _concise(e) from None

    @magic_arguments()
    @argument("--kill", action="store_true", help="kill the leftovers (foreign GPU holders are only reported)")
    @line_magic
    def tfos_cleanup(self, line: str = "") -> None:
        """List processes of earlier runs still alive on the executors (and foreign GPU holders);
        ``--kill`` kills the leftovers. Runs of this kernel still going are left alone."""
        kill = parse_argstring(self.tfos_cleanup, line).kill
        spark = active_backend()
        if spark is None:
            raise _concise(ConfigError("no active SparkContext: create the SparkSession of the cluster "
                                       "to clean first"))
        print(diagnostics.cleanup_report(spark, self.runs.going(), kill=kill))


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics with ``ipython`` (``%load_ext tfos_notebook``)."""
    ipython.register_magics(TFOSMagics)
    # ipywidgets takes about half a second to import: pay it here rather than in the first launch.
    importlib.import_module("ipywidgets")
