"""The package's layout, checked from its source (and, for what an import loads, in a fresh
interpreter): no import cycle, not even through imports inside functions; no import running up the
package's layers; the runtime's driver and node code meeting only in ``runtime/wire/`` and
``runtime/host/``, a node's child process loading nothing of its barrier task, the run's events a
contract that imports nothing of the run; Spark's JVM reached only by ``runtime/driver/spark/``;
and the two places that must stay light (the Jupyter server's handlers, a node's child process)
importing no more than they need."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import tfos_notebook

PACKAGE = Path(tfos_notebook.__file__).parent
NAME = "tfos_notebook"
JVM_NAMES = {"_jvm", "sparkContext", "SparkContext", "_jsc", "statusStore"}


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__.py``)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = (NAME, *path.relative_to(PACKAGE).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _module_level_imports(body: list[ast.stmt]):
    """Import statements run when the module is imported: ``if TYPE_CHECKING:`` blocks and
    function bodies left out, ``try`` / ``if`` blocks included."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            test = node.test
            if not (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
                    or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
                yield from _module_level_imports(node.body)
                yield from _module_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody):
                yield from _module_level_imports(block)


def _every_import(body: list[ast.stmt]):
    """Every import statement: those in functions and ``if TYPE_CHECKING:`` blocks too."""
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def import_graph(imports=_module_level_imports) -> dict[str, set[str]]:
    """``module -> package modules it imports`` (at module level, or as ``imports`` finds them);
    importing ``a.b.c`` counts as importing the packages ``a`` and ``a.b`` too (except the
    importer's own parents, which are imported before it)."""
    mods = modules()
    graph = {}
    for name, path in mods.items():
        is_package = path.name == "__init__.py"
        here = name.split(".") if is_package else name.split(".")[:-1]
        targets = set()
        for node in imports(ast.parse(path.read_text()).body):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            base = node.module or ""
            if node.level:
                base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)
        parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        deps = set()
        for target in targets:
            parts = target.split(".")
            deps.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        graph[name] = {d for d in deps if d in mods and d != name and d not in parents}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert "tfos_notebook.runtime.wire.messages" in import_graph()["tfos_notebook.runtime.driver.run.coordinator"]


def test_the_checker_sees_imports_inside_functions_and_type_checking_blocks():
    module_level, every = import_graph(), import_graph(_every_import)
    launch, supervisor = "tfos_notebook.runtime.driver.run.launch", "tfos_notebook.runtime.driver.run.supervisor"
    feeder, watch = "tfos_notebook.runtime.driver.feed.feeder", "tfos_notebook.runtime.driver.diagnosis.watch"
    assert feeder not in module_level[launch] and feeder in every[launch]  # imported in Run.__init__
    assert watch not in module_level[supervisor] and watch in every[supervisor]  # under TYPE_CHECKING


def test_no_module_level_import_cycle():
    assert cycles(import_graph()) == []


def test_no_import_cycle_even_through_imports_inside_functions():
    assert cycles(import_graph(_every_import)) == []


# The package's layers, top to bottom: a module imports its own layer's and the layers below
# (function-level imports included), never one above. TensorFlowOnSpark's module names and the
# examples sit on top; ``errors``, ``lazy`` and ``cellfn`` at the bottom.
LAYERS = (
    ("", "TFCluster", "TFNode", "TFParallel", "TFManager", "compat", "pipeline", "dfutil", "examples"),
    ("peers",),
    ("notebook", "server"),
    ("search",),
    ("tracking",),
    ("tensorboard",),
    ("devcluster",),
    ("runtime",),
    ("state",),
    ("errors", "lazy", "cellfn"),
)


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    return next(i for i, names in enumerate(LAYERS) if top in names)


def test_every_module_is_in_a_layer_and_no_import_runs_up():
    graph = import_graph(_every_import)
    upward = sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps if _layer(d) < _layer(m))
    assert upward == []  # e.g. the runtime never imports tracking: tracking consumes the run's events


RUNTIME = f"{NAME}.runtime"
# The runtime's rooms by the process their code runs in (wire/ and host/ serve both ends).
SIDES = {"driver": f"{RUNTIME}.driver", "node": f"{RUNTIME}.node", "wire": f"{RUNTIME}.wire",
         "host": f"{RUNTIME}.host"}


def _side(module: str) -> str | None:
    return next((side for side, prefix in SIDES.items() if module == prefix or module.startswith(prefix + ".")), None)


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_driver_and_node_code_meet_only_in_wire_and_host():
    # Every import counts, those inside functions too: the node's code runs on the executors (and
    # in its child process), the driver's in the notebook's process; wire/ (the protocols) and
    # host/ (what one host has: processes, files, mounts, GPUs, versions) are what both import.
    allowed = {"driver": {"driver", "wire", "host"}, "node": {"node", "wire", "host"}, "wire": {"wire", "host"},
               "host": {"host"}}
    crossings = sorted(f"{module} -> {dep}" for module, deps in import_graph(_every_import).items()
                       if _side(module) for dep in deps if _side(dep) and _side(dep) not in allowed[_side(module)])
    assert crossings == []
    assert set(SIDES) == {p.name for p in (PACKAGE / "runtime").iterdir() if (p / "__init__.py").exists()}


def test_the_nodes_child_process_loads_nothing_of_its_barrier_task():
    # node/task/ runs in Spark's Python worker and starts node/child/ (forked or spawned); the
    # child's code never needs the task's.
    task, child = f"{RUNTIME}.node.task", f"{RUNTIME}.node.child"
    wrong = sorted(f"{m} -> {d}" for m, deps in import_graph(_every_import).items() if _within(m, child)
                   for d in deps if _within(d, task))
    assert wrong == []
    assert {p.name for p in (PACKAGE / "runtime" / "node").iterdir() if (p / "__init__.py").exists()} == {
        "task", "child"}


def test_the_run_is_the_driver_room_nothing_else_of_the_driver_imports():
    # run/ assembles the run from the other rooms (diagnosis/, events/, feed/, spark/), which read
    # what they need of it through protocols of their own (feed/feeder.FedRun, FedNode).
    run = f"{RUNTIME}.driver.run"
    wrong = sorted(f"{m} -> {d}" for m, deps in import_graph(_every_import).items()
                   if _side(m) == "driver" and not _within(m, run) for d in deps if _within(d, run))
    assert wrong == []


def test_the_events_are_a_contract_that_imports_none_of_the_driver():
    # notebook/, tracking/, tensorboard/ and search/ consume runtime/driver/events/; it imports
    # only the protocols it names (wire/), so that a consumer pulls in nothing of the run.
    events = f"{RUNTIME}.driver.events"
    wrong = sorted(f"{m} -> {d}" for m, deps in import_graph(_every_import).items() if _within(m, events)
                   for d in deps if _side(d) not in ("wire", "host") and not _within(d, events)
                   and d not in (NAME, RUNTIME, f"{RUNTIME}.driver"))
    assert wrong == []


def test_the_node_code_a_barrier_task_runs_is_named_in_the_node_package():
    # The driver ships a NodePlan; the executor imports the node's function it names.
    from tfos_notebook.runtime.wire.plan import NODE_CODE

    mods = modules()
    for function, module in NODE_CODE.items():
        assert _side(module) == "node", module
        defined = {n.name for n in ast.parse(mods[module].read_text()).body if isinstance(n, ast.FunctionDef)}
        assert function in defined, f"{module} defines no {function}()"


def _top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def test_every_name_a_package_exports_on_first_use_is_where_its_export_says():
    import importlib

    mods = modules()
    wrong = []
    for package in ("tfos_notebook", "tfos_notebook.runtime", "tfos_notebook.notebook", "tfos_notebook.tensorboard"):
        for name, (module, attr) in importlib.import_module(package)._EXPORTS.items():
            target = importlib.util.resolve_name(module, package)
            if target not in mods or attr is not None and attr not in _top_level_names(mods[target]):
                wrong.append(f"{package}.{name} -> {target}.{attr}")
    assert wrong == []


def test_the_driver_loads_none_of_the_nodes_modules():
    loaded = loaded_after("import tfos_notebook.runtime.driver.run.launch")
    assert "tfos_notebook.runtime.driver.run.launch" in loaded
    assert [m for m in loaded if _side(m) == "node"] == []


def test_only_the_spark_backend_touches_the_spark_context_or_the_jvm():
    spark_dir = PACKAGE / "runtime" / "driver" / "spark"
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if spark_dir in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            name = (node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name)
                    else node.name.rsplit(".", 1)[-1] if isinstance(node, ast.alias) else None)
            if name in JVM_NAMES:
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {name}")
    assert offenders == []


def loaded_after(code: str) -> list[str]:
    """The modules loaded in a fresh interpreter after running ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE.parent), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60, env=env)
    return json.loads(out.stdout.splitlines()[-1])


def test_the_server_handlers_load_nothing_of_the_runtime_or_the_notebook_layer():
    loaded = loaded_after("import tfos_notebook.server.handlers")
    heavy = [m for m in loaded if m.startswith(("tfos_notebook.runtime", "tfos_notebook.notebook",
                                                "tfos_notebook.devcluster", "pyspark"))]
    assert "tfos_notebook.server.handlers" in loaded and heavy == []


def test_a_nodes_child_unpickles_a_cell_without_pyspark_numpy_or_pyarrow():
    # What runtime/node/child/main.py imports before it runs the function, then the cell as it travels.
    code = (
        "import pickle, cloudpickle\n"
        "import tfos_notebook.runtime.node.child.main, tfos_notebook.runtime.node.child.ctx\n"
        f"cell = pickle.loads({_pickled_cell()!r})\n"
        "assert cell(None, None) == 42\n"
    )
    loaded = loaded_after(code)
    assert "tfos_notebook.cellfn" in loaded
    assert [m for m in loaded if m.split(".")[0] in ("pyspark", "numpy", "pyarrow")] == []


def test_a_nodes_child_imports_the_package_from_the_folder_that_holds_it():
    # Not from inside it: tfos_notebook/ on the child's path would make ``import tensorboard`` find
    # tfos_notebook/tensorboard/.
    from tfos_notebook.runtime.node.task.nodeproc import _child_env
    from tfos_notebook.runtime.wire.plan import NodePlan

    plan = NodePlan("r", "127.0.0.1", 1, b"s", None, None, [("chief", 0)], "file:///", "/tmp")
    first = _child_env(plan, 0, [])["PYTHONPATH"].split(os.pathsep)[0]
    assert first == str(PACKAGE.parent)


def _pickled_cell() -> bytes:
    import cloudpickle

    from tfos_notebook.cellfn import CellFunction

    return cloudpickle.dumps(CellFunction("return 6 * 7", "<tfos_train In[1]>"))


# Third-party objects whose private attributes the package reads for want of a public API, by
# (module, attribute name), each with its reason. Nothing of the package itself belongs here.
THIRD_PARTY_PRIVATES = {
    # pyspark's classic SparkContext reaches its JVM, and a DataFrame its Java twin, only thus.
    ("runtime/driver/spark/classic.py", "_jsc"): "pyspark: the JavaSparkContext (status tracker, job groups)",
    ("runtime/driver/spark/classic.py", "_jvm"): "pyspark: the py4j gateway's JVM view",
    ("runtime/driver/spark/classic.py", "_jdf"): "pyspark: a DataFrame's Java Dataset (its query plan)",
    ("runtime/driver/spark/classic.py", "_jrdd"): "pyspark: an RDD's Java twin, coalesced where its blocks are",
    ("runtime/driver/spark/classic.py", "_active_spark_context"): "pyspark: the running SparkContext, unstarted",
    ("runtime/driver/spark/hadoopfs.py", "_jsc"): "pyspark: the JavaSparkContext (the Hadoop configuration)",
    ("runtime/driver/spark/hadoopfs.py", "_jvm"): "pyspark: the py4j gateway's JVM view (Hadoop's filesystems)",
    ("runtime/driver/spark/gather.py", "_jsc"): "pyspark: the JavaSparkContext (the status store's cached blocks)",
    ("runtime/driver/spark/gather.py", "_jvm"): "pyspark: the py4j gateway's JVM view (Spark's coalescers)",
    ("runtime/driver/spark/frames.py", "_jdf"): "pyspark: a DataFrame's Java Dataset (its session, its cache)",
    ("runtime/driver/spark/frames.py", "_jvm"): "pyspark: the py4j gateway's JVM view (a Dataset of a plan)",
    ("runtime/driver/spark/connect.py", "_get_default_session"): "pyspark: the Connect session, none created",
    # An RDD's rows are read (the sample) and dealt out in the batches PySpark pickled them in
    # (driver/feed/data.py).
    ("runtime/driver/feed/data.py", "_jrdd_deserializer"): "pyspark: how an RDD keeps its rows (pickled batches?)",
    ("runtime/driver/feed/data.py", "_reserialize"): "pyspark: an RDD's rows pickled in batches",
    ("runtime/driver/feed/data.py", "_jrdd"): "pyspark: an RDD's Java twin, read as the bytes it holds",
    # A node's child rebuilds its task's TaskContext, which pyspark builds from these only.
    ("runtime/node/child/taskcontext.py", "_resources"): "pyspark: TaskContext's resources",
    ("runtime/node/child/taskcontext.py", "_secret"): "pyspark: BarrierTaskContext's auth secret",
    ("runtime/node/child/taskcontext.py", "_conn_info"): "pyspark: BarrierTaskContext's connection",
    ("runtime/node/child/taskcontext.py", "_port"): "pyspark 3.5: BarrierTaskContext's connection",
    ("runtime/node/child/taskcontext.py", "_setTaskContext"): "pyspark: TaskContext.get()'s answer",
    ("runtime/node/child/taskcontext.py", "_initialize"): "pyspark: BarrierTaskContext's barrier() connection",
    ("runtime/node/child/summaries.py", "_writers"): "Keras: a TensorBoard callback's writers, flushed per epoch",
    ("peers/params.py", "_dummy"): "pyspark.ml: the placeholder parent a class-level Param is declared with",
    ("cellfn.py", "_fields"): "ast: a node class's field names (public, named with an underscore)",
    # A node's process forked from its Python worker leaves as an interpreter would, but never
    # through the worker's stack or exit handlers (runtime/node/task/forked.py).
    ("runtime/node/task/forked.py", "_exit"): "os: a forked process's exit, past its parent's frames and handlers",
    ("runtime/node/child/main.py", "_exit"): "os: a node leaving after its decommission checkpoint, past TensorFlow's teardown",
    # tf-keras keeps its backup's epoch only there (runtime/node/child/keras_backup.py).
    ("runtime/node/child/keras_backup.py", "_ckpt_saved_epoch"): "tf-keras: the backup's epoch, set back to resume an epoch",
    ("runtime/node/task/forked.py", "_clear"): "atexit: the worker's exit handlers, dropped in its forked process",
    ("runtime/node/task/forked.py", "_run_exitfuncs"): "atexit: the forked process's own exit handlers, run at its end",
    ("runtime/node/task/forked.py", "_shutdown"): "threading: an interpreter's wait for its threads, as multiprocessing's children call it",
}


def _is_public_protocol(name: str) -> bool:
    """Dunder names, and IPython's display protocol (``_repr_mimebundle_``, ``_render_traceback_``),
    which is public API spelled with one underscore on each side."""
    return name.startswith("__") and name.endswith("__") or name.startswith("_") and name.endswith("_")


def reach_ins(tree: ast.AST) -> list[tuple[int, str, str]]:
    """``(line, owner, name)`` for every private attribute read or written on something other than
    ``self`` or ``cls``: ``obj._name``, and ``getattr(obj, "_name")`` / ``setattr`` / ``hasattr``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner, name = node.value, node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            owner, name = node.args[0], node.args[1].value
        else:
            continue
        if not name.startswith("_") or _is_public_protocol(name):
            continue
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        found.append((node.lineno, ast.unparse(owner), name))
    return found


def test_the_reach_in_checker_sees_what_it_should():
    code = "self._a; cls._b; x._c; self.y._d; getattr(z, '_e'); x.__class__; w._repr_mimebundle_; x.f"
    assert [(owner, name) for _, owner, name in reach_ins(ast.parse(code))] == [
        ("x", "_c"), ("self.y", "_d"), ("z", "_e")]


def test_no_module_reads_another_objects_private_attributes():
    """Parts meet at public methods and properties, or at collaborators handed over explicitly:
    ``obj._name`` is read or written only on ``self`` / ``cls``, and on the third-party objects of
    ``THIRD_PARTY_PRIVATES``."""
    offenders, used = [], set()
    for path in modules().values():
        where = path.relative_to(PACKAGE).as_posix()
        for line, owner, name in reach_ins(ast.parse(path.read_text())):
            if (where, name) in THIRD_PARTY_PRIVATES:
                used.add((where, name))
            else:
                offenders.append(f"{where}:{line}: {owner}.{name}")
    assert offenders == []
    assert set(THIRD_PARTY_PRIVATES) - used == set()  # the allow-list holds nothing stale
