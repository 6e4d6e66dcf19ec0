"""A notebook cell turned into a node's main function, on the driver.

The body of a ``%%tfos_train`` cell becomes a :class:`~tfos_notebook.cellfn.CellFunction`
(``tfos_train_cell(args, ctx)``, see ``cellfn.py``, which the nodes import to run it). Here a
syntax error is reported against the cell's line before anything is launched, and the names the
cell uses from the notebook's namespace are captured to ship with it; a name that cannot travel to
the nodes (a SparkContext, a DataFrame, a lock) or is too large fails here, naming the variable and
the way to pass data instead. Tracebacks from the nodes are trimmed to the cell's frames.

Imports neither IPython nor widgets.
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import symtable
from collections.abc import Mapping
from types import CodeType
from typing import Any

from ..cellfn import FUNCTION_NAME, CellFunction, function_module, register_source
from ..errors import TFOSError
from ..runtime.driver.errors import NodeError

MAX_CAPTURE_BYTES = 50 << 20
SPARK_DRIVER_ONLY = ("SparkContext", "SparkSession", "DataFrame", "RDD", "Column", "StreamingContext")
# IPython puts these in the user namespace; they mean nothing on a node.
IPYTHON_ONLY = frozenset({"In", "Out", "get_ipython", "exit", "quit", "_ih", "_oh", "_dh", "_i", "_ii", "_iii"})


class CellError(TFOSError):
    """The cell cannot become a node function: a syntax error, or a name that cannot be shipped.

    ``line`` is the cell line (counting the ``%%tfos_train`` line as 1) when one applies,
    ``names`` the variables at fault.
    """

    def __init__(self, message: str, line: int | None = None, names: tuple[str, ...] = ()) -> None:
        self.line, self.names = line, names
        super().__init__(message)


def cell_filename(execution_count: int | None, magic: str = "tfos_train") -> str:
    """The file name the cell's code carries in tracebacks."""
    return f"<{magic} In[{execution_count}]>" if execution_count else f"<{magic} cell>"


def _function_module(body: str, filename: str, name: str = FUNCTION_NAME,
                     params: tuple[str, ...] = ("args", "ctx")) -> ast.Module:
    """``cellfn.function_module``, with a syntax error reported against the cell's line."""
    try:
        return function_module(body, filename, name, params)
    except SyntaxError as e:
        raise _syntax_error(e) from None


def _syntax_error(e: SyntaxError) -> CellError:
    where = f"line {e.lineno}" if e.lineno else "the cell"
    text = (e.text or "").rstrip("\n")
    pointer = ""
    if text and e.offset:
        stripped = text.lstrip()
        pointer = f"\n    {stripped}\n    {' ' * max(0, e.offset - 1 - (len(text) - len(stripped)))}^"
    return CellError(f"syntax error in the cell at {where}: {e.msg}{pointer}\n"
                     "Nothing was launched; fix the cell and run it again.", line=e.lineno)


def _compile(module: ast.Module, filename: str) -> CodeType:
    try:
        return compile(module, filename, "exec")
    except SyntaxError as e:  # 'yield' at top level and friends: caught by the compiler, not the parser
        raise _syntax_error(e) from None


def _global_names(module: ast.Module, filename: str) -> set[str]:
    """Names the cell reads from its global namespace (nested functions and classes included)."""
    table = symtable.symtable(ast.unparse(module), filename, "exec")
    names: set[str] = set()
    pending = list(table.get_children())
    while pending:
        t = pending.pop()
        pending += t.get_children()
        for sym in t.get_symbols():
            if sym.is_global() and sym.is_referenced():
                names.add(sym.get_name())
    return names


def _first_use(tree: ast.Module, name: str) -> int | None:
    lines = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name]
    return min(lines) if lines else None


class _SizeLimited(io.RawIOBase):
    """A sink that counts bytes and gives up past ``limit`` (so a huge object is never fully pickled)."""

    class TooLarge(Exception):
        pass

    def __init__(self, limit: int) -> None:
        self.limit, self.size = limit, 0

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        n = memoryview(b).nbytes  # pickle hands large buffers over as PickleBuffer
        self.size += n
        if self.size > self.limit:
            raise self.TooLarge
        return n


def _spark_kind(value: Any) -> str | None:
    for cls in type(value).__mro__:
        if cls.__module__.startswith("pyspark") and cls.__name__ in SPARK_DRIVER_ONLY:
            return cls.__name__
    return None


def check_shippable(name: str, value: Any, limit: int = MAX_CAPTURE_BYTES) -> None:
    """Raise ``CellError`` naming ``name`` when ``value`` cannot travel to the nodes or is over
    ``limit`` bytes pickled."""
    from pyspark import cloudpickle

    kind = _spark_kind(value)
    if kind in ("DataFrame", "RDD"):
        raise CellError(f"the cell uses {name!r}, a Spark {kind}: it lives on the driver and cannot be shipped "
                        f"to the nodes. Pass it with --input-mode spark --data {name} and read it on the nodes "
                        "from ctx, or read the files it comes from inside the cell.", names=(name,))
    if kind is not None:
        raise CellError(f"the cell uses {name!r}, a Spark {kind}: it exists only on the driver and cannot be used "
                        "on the nodes. Remove it from the cell; pass data with --input-mode spark --data VAR.",
                        names=(name,))
    sink = _SizeLimited(limit)
    try:
        cloudpickle.dump(value, sink)
    except _SizeLimited.TooLarge:
        raise CellError(f"the cell uses {name!r}, which is over {limit >> 20} MB pickled: too large to ship with "
                        "the cell. Save it to storage the nodes can read (see ctx.absolute_path) and load it in the "
                        f"cell, or pass it as data with --input-mode spark --data {name}.", names=(name,)) from None
    except Exception as e:
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        if "ONLY_VALID_ON_DRIVER" in detail:
            detail = "it refers to a SparkContext, SparkSession, DataFrame or RDD, which exist only on the driver"
        raise CellError(f"the cell uses {name!r} ({type(value).__name__}), which cannot be shipped to the nodes: "
                        f"{detail}. Create it inside the cell instead, or pass data with --input-mode spark "
                        "--data VAR.", names=(name,)) from None


def capture_cell(body: str, user_ns: Mapping[str, Any], execution_count: int | None = None,
                 limit: int = MAX_CAPTURE_BYTES) -> CellFunction:
    """Turn a cell body into a :class:`CellFunction`, capturing the notebook names it uses.

    Args:
        body: the cell's text below the ``%%tfos_train`` line.
        user_ns: the notebook's namespace.
        execution_count: the cell's ``In[n]``, used in its file name.
        limit: largest pickled size of one captured variable, in bytes.

    Raises:
        CellError: a syntax error (with the cell line), a name defined nowhere, an IPython-only
            name, or a variable that cannot be shipped or is over ``limit``.
    """
    filename = cell_filename(execution_count)
    module = _function_module(body, filename)
    _compile(module, filename)
    missing, ipython_only, names = [], [], {}
    for name in sorted(_global_names(module, filename)):
        if name in IPYTHON_ONLY:
            ipython_only.append(name)
        elif name in user_ns:
            names[name] = user_ns[name]
        elif not hasattr(builtins, name):
            missing.append(name)
    if missing:
        where = ", ".join(f"{n!r} (line {_first_use(module, n)})" for n in missing)
        raise CellError(f"the cell uses names defined nowhere in the notebook: {where}. Define them in an earlier "
                        "cell or inside this one. Nothing was launched.", line=_first_use(module, missing[0]),
                        names=tuple(missing))
    if ipython_only:
        raise CellError(f"the cell uses {', '.join(map(repr, ipython_only))}, which IPython provides only in the "
                        "notebook; the nodes run plain Python.", names=tuple(ipython_only))
    for name, value in names.items():
        check_shippable(name, value, limit)
    fn = CellFunction(body, filename, names)
    fn.register_source()
    return fn


def local_cell_function(body: str, user_ns: dict[str, Any], name: str, params: tuple[str, ...],
                        execution_count: int | None = None, magic: str = "tfos_train") -> Any:
    """A cell body as the function ``name(*params)`` that runs here, in the kernel, with the
    notebook's namespace as its globals (names are looked up when it runs, not captured).
    Its code carries the file name ``<magic In[n]>`` and the cell's line numbers.

    Raises:
        CellError: a syntax error, with the cell line.
    """
    filename = cell_filename(execution_count, magic)
    code = _compile(_function_module(body, filename, name, params), filename)
    register_source(body, filename)
    exec(code, user_ns)
    return user_ns.pop(name)


_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line \d+')


def _trim_block(lines: list[str], filename: str) -> list[str]:
    """One ``Traceback (most recent call last):`` block without the frames above the cell's first."""
    starts = [i for i, line in enumerate(lines) if _FRAME.match(line)]
    cell = next((i for i in starts if _FRAME.match(lines[i]).group("file") == filename), None)
    if cell is None:
        return lines
    return lines[:1] + lines[cell:]


def cell_traceback(text: str, filename: str) -> str:
    """``text`` (a formatted traceback) without the frames above the cell's own: the first frame
    shown is the cell line that raised."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith("Traceback (most recent call last):"):
            blocks.append([])
        blocks[-1].append(line)
    out = [line for block in blocks for line in
           (_trim_block(block, filename) if block and block[0].startswith("Traceback") else block)]
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def cell_error(error: BaseException | None, filename: str) -> BaseException | None:
    """The run's error with a node traceback trimmed to the cell's frames (other errors unchanged)."""
    if isinstance(error, NodeError) and filename in error.traceback_text:
        return NodeError(error.role, error.index, error.host, cell_traceback(error.traceback_text, filename),
                         error.exit_code)
    return error
