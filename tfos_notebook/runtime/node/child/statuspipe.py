"""The child's status pipe to its node: one JSON line per message, whoever sends it (``ctx.report``
and ``ctx.export`` on the function's thread, the data feed's reports, the MLflow relay on MLflow's
own threads). Each line is written whole under one lock, so lines from several threads never mix.

One pipe per child process (``open_pipe`` in ``child.main``); the MLflow relay, which MLflow
creates by itself, finds it with :func:`current`.
"""

from __future__ import annotations

import os
import threading

from ...wire.messages import Message, to_json


class StatusPipe:
    """Sends messages as lines on the file descriptor ``fd``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = threading.Lock()

    def send(self, msg: Message) -> None:
        data = (to_json(msg) + "\n").encode()
        with self._lock:
            while data:
                data = data[os.write(self.fd, data):]


_pipe: StatusPipe | None = None  # this child process's, for the whole of its one run


def open_pipe(fd: int) -> StatusPipe:
    """The status pipe of this child process, on ``fd``."""
    global _pipe
    _pipe = StatusPipe(fd)
    return _pipe


def current() -> StatusPipe | None:
    """This process's status pipe (None outside a node's child process)."""
    return _pipe
