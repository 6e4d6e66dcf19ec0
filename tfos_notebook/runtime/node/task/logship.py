"""Node side of the TensorBoard mirror: ships the new bytes of a node-local log directory, and the
node's profiler traces, to the driver over the control channel.

Messages (node -> driver): ``messages.Files`` with ``(relpath, offset, bytes)`` chunks, at most
``MAX_MESSAGE_BYTES`` of data each, and the area they belong to: "" for the log directory (under the
node's own directory in the mirror), ``PROFILE_AREA`` for traces (under the mirror's root). The driver answers ``FilesRewind`` when it lacks bytes before
an offset it was sent (its mirror was attached or restarted mid-run), and ``FilesResend`` when a
mirror is attached: everything is sent again from the start and the mirror keeps only what it
lacks.
"""

from __future__ import annotations

import logging
import threading

from ...host.filetail import DirTail
from ...wire import messages as m

log = logging.getLogger(__name__)

SHIP_INTERVAL = 0.5
MAX_MESSAGE_BYTES = 4 << 20


class LogShipper:
    """Follows a directory per area (``roots``: area -> local directory) on a thread and sends
    their new bytes through ``conn`` every ``interval``."""

    def __init__(self, conn, roots: dict[str, str], interval: float = SHIP_INTERVAL) -> None:
        self.conn = conn
        self.interval = interval
        self.tails = {area: DirTail(root, max_bytes=MAX_MESSAGE_BYTES) for area, root in roots.items()}
        self._stop = threading.Event()
        self._send_lock = threading.Lock()  # one scan-and-send at a time keeps offsets in order
        self._thread = threading.Thread(target=self._loop, daemon=True, name="tfos-logship")

    def start(self) -> LogShipper:
        self._thread.start()
        return self

    def on_message(self, msg: m.FilesResend | m.FilesRewind) -> None:
        """Handle the driver's ``FilesRewind`` (of one area) / ``FilesResend`` (of all) requests."""
        if isinstance(msg, m.FilesRewind):
            todo = [(self.tails.get(msg.area), msg.files)]
        else:
            todo = [(tail, dict.fromkeys(tail.offsets, 0)) for tail in self.tails.values()]
        for tail, files in todo:
            for relpath, offset in files.items() if tail is not None else ():
                tail.rewind(relpath, offset)

    def _ship(self, area: str, full: bool) -> int:
        with self._send_lock:
            chunks = self.tails[area].scan(full)
            if chunks:
                self.conn.send(m.encode(m.Files(tuple((c.relpath, c.offset, c.data) for c in chunks), area)))
            return len(chunks)

    def drain(self, area: str) -> None:
        """Send every byte of ``area`` now (a profile's trace, before the message that announces it)."""
        try:
            while self._ship(area, full=True):
                pass
        except OSError as e:
            log.warning("the files of %r could not be shipped: %s", area or "the log directory", e)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                for area in self.tails:
                    self._ship(area, full=False)
            except OSError as e:  # the driver is gone; the node notices and stops
                log.info("event-file shipping ends: %s", e)
                return

    def close(self) -> None:
        """Stop the thread, then send every byte still unsent (call before reporting the result)."""
        self._stop.set()
        self._thread.join(timeout=10)
        for area in self.tails:
            self.drain(area)
