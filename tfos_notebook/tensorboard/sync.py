"""The loop that keeps a mirror up to date with its sources, on a background thread."""

from __future__ import annotations

import logging
import threading
import time

from .mirror import Mirror, UnsafePathError, join

log = logging.getLogger(__name__)


class MirrorSync:
    """Copies new bytes from each source into ``mirror`` every ``interval`` seconds.

    A source that fails (a remote filesystem briefly unreachable) is logged and retried on the
    next tick; it never stops the loop or the other sources.
    """

    def __init__(self, mirror: Mirror, interval: float = 0.5) -> None:
        self.mirror = mirror
        self.interval = interval
        self.ticks = 0
        self._sources: list[tuple[str, object]] = []
        self._errors: dict[int, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, source, prefix: str = "") -> None:
        """Mirror ``source`` (see ``sources.open_source``) under ``prefix/`` (empty: the root)."""
        with self._lock:
            self._sources.append((prefix, source))

    def tick(self, full: bool = False) -> int:
        """One pass over every source; returns the bytes appended. ``full`` checks every file and
        drains every source (used once more when a run ends)."""
        with self._lock:
            sources = list(self._sources)
        total = 0
        for i, (prefix, source) in enumerate(sources):
            try:
                while True:
                    n = self._copy(prefix, source, full)
                    total += n
                    if not (full and n):
                        break
                self._errors.pop(i, None)
            except Exception as e:  # any filesystem error: reported once, retried next tick
                if self._errors.get(i) != str(e):
                    log.warning("mirroring %r failed (retrying every %.1fs): %s", source, self.interval, e)
                    self._errors[i] = str(e)
        self.ticks += 1
        return total

    def _copy(self, prefix: str, source, full: bool) -> int:
        appended = 0
        for chunk in source.changes(lambda rel: self.mirror.size(join(prefix, rel)), full):
            try:
                need = self.mirror.append(join(prefix, chunk.relpath), chunk.offset, chunk.data)
            except UnsafePathError as e:
                self.mirror.rejected += 1
                log.warning("mirror %s: %s", self.mirror.root, e)
                continue
            if need is None:
                appended += len(chunk.data)
            else:
                source.rewind(chunk.relpath, need)
        return appended

    def start(self) -> MirrorSync:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, daemon=True, name="tfos-tb-mirror")
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.tick()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def stop(self, final_tick: bool = True) -> None:
        """Stop the loop; with ``final_tick``, copy everything the sources still hold first."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if final_tick:
            self.tick(full=True)
