"""Run a function on a module right after it is imported in a node's child process (or at once
if it already was), before anything that imported it can use it: how the child installs Spark's
task context into ``pyspark.taskcontext`` (``taskcontext.py``) and its autologging rules into
MLflow's flavors (``mlflowrelay.py``) without importing either itself."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


def after_import(name: str, then: Callable[[ModuleType], None]) -> None:
    """Call ``then(module)`` once the module ``name`` is loaded: now if it is, else right after
    it has run."""
    module = sys.modules.get(name)
    if module is not None:
        then(module)
    else:
        sys.meta_path.insert(0, _AfterImport(name, then))


class _AfterImport:
    """Finds the module ``name`` where Python would and calls ``then`` right after it has run. A
    meta path finder and loader by protocol: ``importlib.abc``, their base classes, costs a node's
    child 6 ms of imports (``importlib.resources``) before its function can start."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name, self.then = name, then
        self.loader: Any = None

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            self.loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        self.then(module)
