"""Errors a user can meet, each saying what happened and what to do. ``TFOSError`` and
``ConfigError`` come from the package's ``errors.py``, which layers below the runtime raise too;
the errors both ends raise (``ChannelError``, ``FeedError``, ``FeedTimeout``) from ``wire/errors.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...errors import ConfigError, TFOSError
from ..wire.errors import ChannelError, FeedError, FeedTimeout
from ..wire.plan import node_name

if TYPE_CHECKING:
    from .events.finding import Finding

__all__ = ["ChannelError", "ConfigError", "FeedError", "FeedTimeout", "LaunchError", "NodeError", "PreflightError",
           "ReservationTimeout", "RunStopped", "SparkJobError", "TFOSError"]


class LaunchError(TFOSError):
    """A launch cannot proceed; ``findings`` say why (cause, evidence, remedy)."""

    def __init__(self, headline: str, findings: Sequence[Finding] = ()) -> None:
        self.findings = list(findings)
        super().__init__("\n".join([headline, *(f.describe("- ") for f in self.findings)]))


class PreflightError(LaunchError):
    """The cluster cannot run the requested tasks; raised before anything is submitted."""


class ReservationTimeout(LaunchError):
    """Not every node registered within the reservation timeout."""


class NodeError(TFOSError):
    """The user's function failed on a node; carries that node's role, host and traceback."""

    def __init__(self, role: str, index: int, host: str, traceback_text: str, exit_code: int | None = None,
                 findings: Sequence[Finding] = (), cause: str = ""):
        self.role, self.index, self.host = role, index, host
        self.cause = cause  # "memory": the node's process ran out of memory
        self.traceback_text = traceback_text
        self.exit_code = exit_code
        self.findings = list(findings)
        where = f"{node_name(role, index)} on {host}"
        detail = traceback_text.rstrip() or f"the process exited with code {exit_code} and printed no traceback"
        hints = "".join("\n" + f.describe("likely cause: ", evidence=False, sep="\n") for f in self.findings)
        super().__init__(f"the function failed on {where}:\n{detail}{hints}")


class ResultError(NodeError):
    """A node's function returned a value the driver cannot unpickle (its class is not importable
    here, typically); not retried, since the function would return it again."""

    def __init__(self, role: str, index: int, host: str, value_type: str, cause: BaseException) -> None:
        what = f"a value of type {value_type}" if value_type else "a value"
        super().__init__(role, index, host,
                         f"the function returned {what} that the driver cannot unpickle "
                         f"({type(cause).__name__}: {cause}): return plain Python or numpy values, or make "
                         "the module that defines the type importable on the driver")


class RunStopped(TFOSError):
    """The run was stopped on request (Stop button, ``%tfos_stop``, ``run.stop()``)."""


class SparkJobError(LaunchError):
    """The Spark job that carries the nodes failed outside the user's function; ``findings`` say
    what is known of why."""
