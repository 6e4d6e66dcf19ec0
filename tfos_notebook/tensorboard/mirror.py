"""The driver-side mirror of a run's event files: a local directory TensorBoard reads.

Files are only ever appended to, in place: TensorBoard's fast loader follows bytes appended to an
event file within about a second but never re-reads a file that was replaced. Every append says
at which offset its bytes belong; the mirror checks it against the size on disk, so a resend
(bytes it already holds) is trimmed and a gap (bytes it never got) is refused with the offset it
needs. The sizes on disk are the mirror's whole state: a mirror restarted mid-run resumes from them
without duplicating or losing bytes, and its files stay byte-identical to their sources.

Names come from workers and remote listings: any that could leave the mirror directory (``..``,
absolute paths, backslashes, symlinks inside the mirror pointing out) are rejected.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable

from ..errors import TFOSError
from ..runtime.host.filetail import Chunk

log = logging.getLogger(__name__)


class UnsafePathError(TFOSError, ValueError):
    """A file name would escape the mirror directory."""


def check_relpath(relpath: str) -> str:
    """``relpath`` if it is a safe '/'-separated relative path, else raise ``UnsafePathError``."""
    if not isinstance(relpath, str) or not relpath:
        raise UnsafePathError(f"refused file name {relpath!r}: expected a non-empty relative path")
    if "\x00" in relpath or "\\" in relpath or relpath.startswith("/") or (len(relpath) > 1 and relpath[1] == ":"):
        raise UnsafePathError(f"refused file name {relpath!r}: absolute paths, drive letters, backslashes "
                              "and NUL bytes cannot be mirrored")
    if any(part in ("", ".", "..") for part in relpath.split("/")):
        raise UnsafePathError(f"refused file name {relpath!r}: empty, '.' and '..' components could leave "
                              "the mirror directory")
    return relpath


def join(prefix: str, relpath: str) -> str:
    """``prefix/relpath`` ('/'-separated); the prefix may be empty."""
    return f"{prefix}/{relpath}" if prefix else relpath


class Mirror:
    """An append-only copy of event files under ``root`` (created if missing).

    Safe to call from several threads (the control channel's connection threads and the sync loop).
    """

    def __init__(self, root: str) -> None:
        os.makedirs(root, exist_ok=True)
        self.root = os.path.realpath(root)
        self.rejected = 0  # chunks refused for unsafe names
        self._sizes: dict[str, int] = {}
        self._paths: dict[str, str] = {}  # relpath -> checked local path, its directory created
        self._lock = threading.Lock()

    def path(self, relpath: str) -> str:
        """The local path of ``relpath`` in the mirror, after checking that it stays inside."""
        target = os.path.join(self.root, *check_relpath(relpath).split("/"))
        parent = os.path.realpath(os.path.dirname(target))
        if parent != self.root and not parent.startswith(self.root + os.sep):
            raise UnsafePathError(f"refused file name {relpath!r}: it resolves to {parent}, outside the "
                                  f"mirror {self.root}")
        if os.path.islink(target):
            raise UnsafePathError(f"refused file name {relpath!r}: it is a symbolic link in the mirror")
        return target

    def size(self, relpath: str) -> int:
        """Bytes of ``relpath`` the mirror holds (0 when it has none)."""
        with self._lock:
            known = self._sizes.get(relpath)
        if known is not None:
            return known
        try:
            size = os.stat(self.path(relpath)).st_size
        except (OSError, UnsafePathError):  # an unsafe name is refused when appended
            return 0
        with self._lock:
            self._sizes.setdefault(relpath, size)
        return size

    def append(self, relpath: str, offset: int, data: bytes) -> int | None:
        """Put ``data`` at byte ``offset`` of ``relpath``.

        Returns None when the bytes are in place (appended, or already held), or the offset the
        mirror needs next when ``offset`` is past its end (the bytes in between never arrived).
        Raises ``UnsafePathError`` for a name that would escape the mirror.
        """
        target = self._paths.get(relpath)
        if target is None:
            target = self.path(relpath)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            self._paths[relpath] = target
        with self._lock:
            with open(target, "ab") as f:
                have = os.fstat(f.fileno()).st_size  # the truth, even if another process appended
                if offset > have:
                    self._sizes[relpath] = have
                    return have
                skip = have - offset
                if skip < len(data):
                    f.write(data[skip:] if skip else data)
                    have += len(data) - skip
                self._sizes[relpath] = have
        return None

    def receive(self, prefix: str, chunks: Iterable[Chunk]) -> dict[str, int]:
        """Append chunks shipped by one node into ``prefix/``; returns ``{relpath: offset}`` for
        the files with a gap, to be sent again from that offset. Unsafe names are logged and
        dropped, never written."""
        gaps: dict[str, int] = {}
        for chunk in chunks:
            if chunk.relpath in gaps:
                continue
            try:
                need = self.append(join(prefix, check_relpath(chunk.relpath)), chunk.offset, chunk.data)
            except UnsafePathError as e:
                self.rejected += 1
                log.warning("mirror %s: %s", self.root, e)
                continue
            if need is not None:
                gaps[chunk.relpath] = need
        return gaps
