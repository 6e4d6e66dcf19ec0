"""What is at the other end of the kernel, and where a background thread's output should land.

Two facts of Jupyter shape this module. A widget renders only where a widget manager runs
(JupyterLab, Notebook 7, VS Code, Databricks); nbclient, papermill and terminal IPython have none,
so the monitor must fall back to text there. And ipykernel 7 sends what a background thread prints
to the most recently started cell unless that thread sets its own parent message.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import ConfigError

log = logging.getLogger(__name__)

MONITOR_MODES = ("auto", "widget", "text", "none")
MONITOR_ENV = "TFOS_MONITOR"


def ipython_shell() -> Any:
    """The running IPython shell, or None in plain Python (IPython is not imported to ask: a running
    shell has imported it already)."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def widget_bundle(widget: Any, **kwargs: Any) -> dict:
    """The display bundle of an ipywidget: ipywidgets 8's ``_repr_mimebundle_``, or what ipywidgets 7
    (Databricks' runtimes ship 7.7-7.8) displays from its ``_ipython_display_``, the same view
    reference to the widget's model."""
    if hasattr(widget, "_repr_mimebundle_"):
        return widget._repr_mimebundle_(**kwargs)
    return {"text/plain": repr(widget)[:110],
            "application/vnd.jupyter.widget-view+json": {"version_major": 2, "version_minor": 0,
                                                         "model_id": widget.model_id}}


def has_widget_frontend(shell: Any) -> bool:
    """True when the cell being run came from a frontend that renders widgets.

    JupyterLab, Notebook 7 and VS Code put a ``cellId`` in the metadata of every execute request;
    nbclient and papermill send none, and terminal IPython has no kernel at all. Databricks
    renders core widgets and is recognised by its runtime's environment variable.
    """
    if os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        return True
    if shell is None or getattr(shell, "kernel", None) is None:
        return False
    parent = shell.get_parent() or {}
    return "cellId" in (parent.get("metadata") or {})


def choose_monitor(mode: str, shell: Any) -> str:
    """``widget``, ``text`` or ``none`` for the requested ``mode``; ``auto`` honours the
    ``TFOS_MONITOR`` environment variable first, then looks at the frontend."""
    if mode not in MONITOR_MODES:
        raise ConfigError(f"monitor must be one of {', '.join(MONITOR_MODES)}, got {mode!r}")
    if mode == "auto":
        mode = os.environ.get(MONITOR_ENV, "auto")
        if mode not in MONITOR_MODES:
            raise ConfigError(f"{MONITOR_ENV} must be one of {', '.join(MONITOR_MODES)}, got {mode!r}")
    if mode == "auto":
        return "widget" if has_widget_frontend(shell) else "text"
    return mode


class OutputTarget:
    """The cell whose output a background thread writes to.

    Created while the launching cell runs, it remembers that cell's parent message; the thread
    enters :meth:`active` around each write. :meth:`follow_caller` points it, for a while, at the
    cell of the calling thread (the one that waits on the run).

    How a thread's output finds its cell depends on ipykernel: 7 sends it where the thread sets its
    parent (``set_thread_parent``); 6.29 (Databricks 17.3's) sends it to the cell that started the
    thread unless the thread sets its streams' parent, which 6.29 keeps per thread; earlier 6.x
    send it to the cell running now, as there is one parent for every thread, which this leaves as
    it is (setting it would move the running cell's own output).
    """

    def __init__(self, shell: Any = None) -> None:
        self.shell = shell if shell is not None and getattr(shell, "kernel", None) is not None else None
        self.parent = self.shell.get_parent() if self.shell is not None else None

    @contextmanager
    def active(self) -> Iterator[None]:
        if self.shell is None or not self.parent:
            yield
            return
        if hasattr(self.shell, "set_thread_parent"):  # ipykernel 7
            tokens = self.shell.set_thread_parent(self.parent)
            try:
                yield
            finally:
                self.shell.reset_thread_parent(tokens)
            return
        if _streams_keep_a_parent_per_thread():
            for stream in (sys.stdout, sys.stderr):
                if hasattr(stream, "set_parent"):
                    stream.set_parent(self.parent)
        yield

    def show(self, view: Any, show: Callable[[Any], None]) -> None:
        """``show(view)`` from a background thread, writing to this cell; nothing without a view,
        and a view that fails is logged, never raised (it must not break what called it)."""
        if view is None:
            return
        try:
            with self.active():
                show(view)
        except Exception:
            log.exception("a view could not be updated")

    @contextmanager
    def follow_caller(self) -> Iterator[None]:
        if self.shell is None:
            yield
            return
        previous, self.parent = self.parent, self.shell.get_parent()
        try:
            yield
        finally:
            self.parent = previous


def _streams_keep_a_parent_per_thread() -> bool:
    """Whether this kernel's output streams keep their parent message per thread (ipykernel 6.29 up
    to 7, which set it per thread its own way)."""
    ipykernel = sys.modules.get("ipykernel")
    version = getattr(ipykernel, "version_info", ()) or ()
    return tuple(version[:2]) >= (6, 29)
