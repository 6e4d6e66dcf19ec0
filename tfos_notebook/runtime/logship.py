"""Node side of the TensorBoard mirror: ships the new bytes of a node-local log directory to the
driver over the control channel.

Messages (node -> driver): ``{"type": "files", "chunks": [[relpath, offset, bytes], ...]}``, at
most ``MAX_MESSAGE_BYTES`` of data each. The driver answers ``{"type": "files_rewind", "files":
{relpath: offset}}`` when it lacks bytes before an offset it was sent (its mirror was attached or
restarted mid-run), and ``{"type": "files_resend"}`` when a mirror is attached: everything is sent
again from the start and the mirror keeps only what it lacks.
"""

from __future__ import annotations

import threading

from .filetail import DirTail

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

    def on_message(self, msg: dict) -> None:
        """Handle the driver's ``files_rewind`` / ``files_resend`` requests."""
        if msg.get("type") == "files_resend":
            for relpath in self.tail.offsets:
                self.tail.rewind(relpath, 0)
        elif msg.get("type") == "files_rewind":
            try:
                files = {str(relpath): int(offset) for relpath, offset in dict(msg.get("files", {})).items()}
            except (TypeError, ValueError):
                return
            for relpath, offset in files.items():
                self.tail.rewind(relpath, offset)

    def _ship(self, full: bool) -> int:
        with self._send_lock:
            chunks = self.tail.scan(full)
            if chunks:
                self.conn.send({"type": "files", "chunks": [[c.relpath, c.offset, c.data] for c in chunks]})
            return len(chunks)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._ship(full=False)
            except OSError:  # the driver is gone; the node notices and stops
                return

    def close(self) -> None:
        """Stop the thread, then send every byte still unsent (call before reporting the result)."""
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            while self._ship(full=True):
                pass
        except OSError:
            pass
