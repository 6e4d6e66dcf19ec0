"""Names a package exports but imports on first use (PEP 562), so that importing the package
costs nothing until a name is used: a node's child process imports ``tfos_notebook`` on every
launch and must not pay for pyspark, numpy and pyarrow before it runs the user's function."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

Exports = dict[str, tuple[str, str | None]]  # name: (module relative to the package, attribute or None: the module)


def lazy_exports(package: str, namespace: dict[str, Any], exports: Exports) -> tuple[Callable, Callable]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (whose globals are ``namespace``) for
    ``exports``; each name is imported once, then kept in ``namespace``."""

    def getattr_(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attr = exports[name]
        value = importlib.import_module(module, package)
        value = value if attr is None else getattr(value, attr)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *exports})

    return getattr_, dir_
