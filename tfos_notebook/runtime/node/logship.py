"""Node side of the TensorBoard mirror: ships the new bytes of a node-local log directory to the
driver over the control channel.

Messages (node -> driver): ``messages.Files`` with ``(relpath, offset, bytes)`` chunks, at most
``MAX_MESSAGE_BYTES`` of data each. The driver answers ``FilesRewind`` when it lacks bytes before
an offset it was sent (its mirror was attached or restarted mid-run), and ``FilesResend`` when a
mirror is attached: everything is sent again from the start and the mirror keeps only what it
lacks.
"""

from __future__ import annotations

import logging
import threading

from ..wire import messages as m
from ..wire.filetail import DirTail

log = logging.getLogger(__name__)

SHIP_INTERVAL = 0.5
MAX_MESSAGE_BYTES = 4 << 20


class LogShipper:
    """Follows ``root`` on a thread and sends its new bytes through ``conn`` every ``interval``."""

    def __init__(self, conn, root: str, interval: float = SHIP_INTERVAL) -> None:
        self.conn = conn
        self.interval = interval
        self.tail = DirTail(root, max_bytes=MAX_MESSAGE_BYTES)
        self._stop = threading.Event()
        self._send_lock = threading.Lock()  # one scan-and-send at a time keeps offsets in order
        self._thread = threading.Thread(target=self._loop, daemon=True, name="tfos-logship")

    def start(self) -> LogShipper:
        self._thread.start()
        return self

    def on_message(self, msg: m.FilesResend | m.FilesRewind) -> None:
        """Handle the driver's ``FilesRewind`` / ``FilesResend`` requests."""
        files = msg.files if isinstance(msg, m.FilesRewind) else dict.fromkeys(self.tail.offsets, 0)
        for relpath, offset in files.items():
            self.tail.rewind(relpath, offset)

    def _ship(self, full: bool) -> int:
        with self._send_lock:
            chunks = self.tail.scan(full)
            if chunks:
                self.conn.send(m.encode(m.Files(tuple((c.relpath, c.offset, c.data) for c in chunks))))
            return len(chunks)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._ship(full=False)
            except OSError as e:  # the driver is gone; the node notices and stops
                log.info("event-file shipping ends: %s", e)
                return

    def close(self) -> None:
        """Stop the thread, then send every byte still unsent (call before reporting the result)."""
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            while self._ship(full=True):
                pass
        except OSError as e:
            log.warning("the last event-file bytes could not be shipped: %s", e)
