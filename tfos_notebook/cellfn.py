"""A ``%%tfos_train`` cell as a node's main function: what a node unpickles and calls.

The cell's body becomes ``tfos_train_cell(args, ctx)``, compiled under a file name of its own
(``<tfos_train In[7]>``) with line numbers as the cell shows them (the magic's own line is line 1),
so a traceback from a node points at the cell's line.

Every node's child process unpickles a :class:`CellFunction` before it runs it, which imports this
module: it imports nothing but the standard library, so that unpickling the cell loads none of the
notebook layer (checking and capturing a cell is ``notebook/capture.py``'s job, on the driver).
"""

from __future__ import annotations

import ast
import builtins
import linecache
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

FUNCTION_NAME = "tfos_train_cell"
MAGIC_LINES = 1  # the %%tfos_train line above the body


def register_source(body: str, filename: str) -> None:
    """Put a cell's lines in ``linecache`` under ``filename``, so tracebacks can print them."""
    text = _padded(body)
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)


def function_module(body: str, filename: str, name: str = FUNCTION_NAME,
                    params: tuple[str, ...] = ("args", "ctx")) -> ast.Module:
    """``def tfos_train_cell(args, ctx): <body>`` (or ``name(*params)``) as an AST whose lines are
    the cell's lines.

    Raises:
        SyntaxError: the body does not parse (its line is the cell's line).
    """
    tree = ast.parse(_padded(body), filename, "exec")
    arguments = ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in params], vararg=None,
                              kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    func = ast.FunctionDef(name=name, args=arguments, body=tree.body or [ast.Pass()],
                           decorator_list=[], returns=None)
    if "type_params" in ast.FunctionDef._fields:  # Python 3.12+
        func.type_params = []
    ast.copy_location(func, tree.body[0] if tree.body else ast.Pass(lineno=1, col_offset=0))
    module = ast.Module(body=[func], type_ignores=[])
    return ast.fix_missing_locations(module)


def _padded(body: str) -> str:
    """The body with blank lines standing in for the magic line, so line numbers match the cell."""
    return "\n" * MAGIC_LINES + body


@dataclass(frozen=True)
class CellFunction:
    """The cell as ``main_fun(args, ctx)``: its source, file name and captured names.

    Pickles by reference to this class plus plain data, so it travels in Spark's task closure;
    on the node it compiles the cell and registers its lines so tracebacks show them. Made by
    ``notebook.capture.capture_cell``, which has checked that the body compiles.
    """

    body: str
    filename: str
    names: dict[str, Any] = field(default_factory=dict)

    def code(self) -> CodeType:
        """The compiled module that defines the cell's function."""
        return compile(function_module(self.body, self.filename), self.filename, "exec")

    def register_source(self) -> None:
        """Put the cell's lines in ``linecache`` so tracebacks can print them."""
        register_source(self.body, self.filename)

    def __call__(self, args: Any, ctx: Any) -> Any:
        self.register_source()
        namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": "__tfos_train__", **self.names}
        exec(self.code(), namespace)
        return namespace[FUNCTION_NAME](args, ctx)
