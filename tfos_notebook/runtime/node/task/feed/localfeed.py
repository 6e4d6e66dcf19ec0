"""Where a node's own data feed listens, as its barrier task learns it: the node's task tells it
(``task.run_node``), and the task that feeds the node in-stage waits for it (``feed/instage.py``)."""

from __future__ import annotations

import threading


class LocalFeed:
    """Where this node's own data feed listens, once its process serves it (None if it never does)."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self.address: tuple[str, int] | None = None

    def serving(self, host: str, port: int) -> None:
        self.address = (host, port)
        self._ready.set()

    def ended(self) -> None:
        self._ready.set()

    def wait(self) -> tuple[str, int] | None:
        self._ready.wait()
        return self.address
