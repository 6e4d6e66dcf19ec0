"""What each node's process imports while its cluster forms, before the function runs.

Importing TensorFlow takes seconds of a node's start (1-6 s on two cores), and a function imports
it first thing. A node's process starts with its Spark task and then waits: for the node to
register, for every other node, for the cluster spec. When the function uses TensorFlow, the
process imports it during that wait, on a thread of its own (``node/child/main.py``), and the function
starts once both are done, so the import overlaps the reservation instead of following it.

Whether the function uses TensorFlow is read from its code, on the driver, without running it: the
names its code objects use (``import tensorflow`` names ``tensorflow``; ``tf.keras`` names a
global that is the module), followed into the functions, closures, ``functools.partial`` and
callable objects it refers to, a few levels deep. A function that reaches TensorFlow only through
code this cannot see (``exec``, ``importlib``) imports it itself, as before; one that names
TensorFlow and never imports it costs its node the import. ``Run(env={"TFOS_PREIMPORT": ""})``
turns it off for a run.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Iterator
from typing import Any

from ....cellfn import CellFunction

#: Top-level module names that mean the function runs TensorFlow (Keras runs on it).
TENSORFLOW_NAMES = frozenset({"tensorflow", "keras", "tf_keras"})
MAX_DEPTH = 4  # calls followed from the main function


def preimports(main_fun: Any) -> tuple[str, ...]:
    """The modules the nodes' processes import before ``main_fun`` starts: TensorFlow when the
    function's code reaches it, else none."""
    return ("tensorflow",) if _uses_tensorflow(main_fun, MAX_DEPTH, set()) else ()


def _uses_tensorflow(obj: Any, depth: int, seen: set[int]) -> bool:
    if depth < 0 or id(obj) in seen:
        return False
    seen.add(id(obj))
    if isinstance(obj, types.ModuleType):
        return obj.__name__.partition(".")[0] in TENSORFLOW_NAMES
    if isinstance(obj, type):  # a class: what it does when called is not followed
        return False
    if isinstance(obj, functools.partial):
        return any(_uses_tensorflow(o, depth, seen) for o in (obj.func, *obj.args, *obj.keywords.values()))
    if isinstance(obj, types.MethodType):
        return _uses_tensorflow(obj.__func__, depth, seen)
    if isinstance(obj, CellFunction):  # a %%tfos_train cell: its body, with the names it captured
        return _code_uses_tensorflow(obj.code(), obj.names, depth, seen)
    if isinstance(obj, types.FunctionType):
        return (_code_uses_tensorflow(obj.__code__, obj.__globals__, depth, seen)
                or any(_uses_tensorflow(c, depth - 1, seen) for c in _bound(obj.__closure__)))
    if callable(obj):  # an object called as the function (a dataclass holding the user's function)
        attributes = vars(obj).values() if hasattr(obj, "__dict__") else ()
        return (_uses_tensorflow(type(obj).__call__, depth, seen)
                or any(_uses_tensorflow(a, depth - 1, seen) for a in attributes if callable(a)))
    return False


def _code_uses_tensorflow(code: types.CodeType, namespace: dict[str, Any], depth: int, seen: set[int]) -> bool:
    for name in _names(code):
        if name in TENSORFLOW_NAMES:
            return True
        value = namespace.get(name)
        if callable(value) or isinstance(value, types.ModuleType):
            if _uses_tensorflow(value, depth - 1, seen):
                return True
    return False


def _names(code: types.CodeType) -> Iterator[str]:
    """The global, attribute and imported names used by ``code`` and the functions defined in it."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)


def _bound(closure: tuple[types.CellType, ...] | None) -> list[Any]:
    """The values of a function's closure variables that are bound."""
    values = []
    for cell in closure or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # not bound yet
            pass
    return values
