"""Incremental tail of a directory tree: the bytes appended to each file since the last scan.

Used on the nodes to ship TensorBoard event files to the driver, and on the driver to mirror a
local or FUSE-mounted log directory. It assumes files only grow (event files do): a file that
shrinks is reported once and no longer followed.

A scan is cheap when nothing changed. Directories are stat'ed every scan and listed again when
their mtime moves (a file was added or removed), and otherwise once every ``cold_every`` scans. "Hot" files are stat'ed every scan: the
newest file of each directory (a TensorBoard writer appends to the newest event file of its run,
however long it pauses between epochs), files that grew within ``hot_secs`` (by their mtime when
first seen), and files whose bytes are not all read yet; at most ``max_hot`` of them, the most
recently grown first. The others ("cold") are stat'ed in a rotating slice, each once every
``cold_every`` scans. So an idle tree of 10k files costs a fraction of 10k stats, and a file that
wakes up after a long pause is seen within ``cold_every`` scans. ``scan(full=True)`` checks every
file (the last scan before a node exits).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 8 << 20
# A directory modified this recently may still gain entries within its mtime's granularity.
_SETTLE_NS = 2_000_000_000


@dataclass(frozen=True)
class Chunk:
    """``data`` belongs at byte ``offset`` of the file at ``relpath`` ('/'-separated, relative)."""

    relpath: str
    offset: int
    data: bytes


class _File:
    """A followed file: read up to ``offset``; ``size`` and ``changed`` (monotonic time it last
    grew, from its mtime when first seen) as of its last stat."""

    __slots__ = ("path", "offset", "size", "changed", "frozen")

    def __init__(self, path: str, offset: int, size: int, mtime: float) -> None:
        self.path = path
        self.offset = offset
        self.size = size
        self.changed = time.monotonic() - max(0.0, time.time() - mtime)
        self.frozen = False


class DirTail:
    """Follows every file under ``root`` (which need not exist yet).

    Args:
        root: the local directory to follow.
        start_offset: ``start_offset(relpath)`` gives the offset from which to follow a file seen
            for the first time (default 0); a mirror passes the sizes it already holds, to resume.
        max_bytes: at most this many bytes are returned by one scan; the rest comes next scan.
        hot_secs: a file that grew within this many seconds is stat'ed on every scan.
        max_hot: at most this many files are stat'ed on every scan, files with unread bytes aside.
        cold_every: the other files are each stat'ed, and every directory listed, once every this
            many scans.
    """

    def __init__(self, root: str, start_offset: Callable[[str], int] | None = None,
                 max_bytes: int = DEFAULT_MAX_BYTES, hot_secs: float = 10.0, max_hot: int = 512,
                 cold_every: int = 10) -> None:
        self.root = root
        self.start_offset = start_offset or (lambda relpath: 0)
        self.max_bytes = max_bytes
        self.hot_secs = hot_secs
        self.max_hot = max_hot
        self.cold_every = max(1, cold_every)
        self._dirs: dict[str, int] = {}  # reldir -> mtime_ns at its last listing (-1: list again)
        self._entries: dict[str, set[str]] = {}  # reldir -> relpaths listed in it
        self._files: dict[str, _File] = {}
        self._newest: dict[str, str] = {}  # reldir -> its most recently grown file
        self._cold_cursor = 0
        self._dir_cursor = 0
        self._lock = threading.Lock()

    @property
    def offsets(self) -> dict[str, int]:
        """How far each followed file has been read."""
        with self._lock:
            return {rel: f.offset for rel, f in self._files.items()}

    def rewind(self, relpath: str, offset: int) -> None:
        """Read ``relpath`` again from ``offset`` (a receiver lost bytes and asks for them)."""
        with self._lock:
            f = self._files.get(relpath)
            if f is not None and 0 <= offset:
                f.offset, f.frozen = offset, False
                f.changed = time.monotonic()

    def scan(self, full: bool = False) -> list[Chunk]:
        """New bytes since the last scan, at most ``max_bytes`` in all (call again for the rest)."""
        with self._lock:
            self._refresh_dirs()
            chunks: list[Chunk] = []
            budget = self.max_bytes
            for rel in self._to_check(full):
                if budget <= 0:
                    break
                chunk = self._read_new(rel, self._files[rel], budget)
                if chunk is not None:
                    chunks.append(chunk)
                    budget -= len(chunk.data)
            return chunks

    # -- directories ---------------------------------------------------------------------------
    def _refresh_dirs(self) -> None:
        if "" not in self._dirs:
            self._visit("")
            return
        dirs = list(self._dirs)
        # A rotating slice is listed whatever its mtime says: some network and FUSE filesystems
        # (NFS, /dbfs) do not move a directory's mtime when a file is added.
        n = math.ceil(len(dirs) / self.cold_every)
        start = self._dir_cursor % len(dirs)
        for reldir in (dirs[start:] + dirs[:start])[:n]:
            self._dirs[reldir] = -1
        self._dir_cursor = start + n
        for reldir in dirs:
            if reldir in self._dirs:  # not dropped with a vanished parent this round
                self._visit(reldir)

    def _visit(self, reldir: str) -> None:
        """Stat a directory; list it again when its mtime moved (entries added or removed)."""
        try:
            mtime = os.stat(self._abs(reldir)).st_mtime_ns
        except OSError:
            if reldir:
                self._forget(reldir)
            return
        if mtime == self._dirs.get(reldir):
            return
        # An unsettled directory (mtime within the filesystem's granularity) is listed again next scan.
        self._dirs[reldir] = mtime if time.time_ns() - mtime > _SETTLE_NS else -1
        seen: set[str] = set()
        subdirs: list[str] = []
        try:
            with os.scandir(self._abs(reldir)) as entries:
                for entry in entries:
                    rel = f"{reldir}/{entry.name}" if reldir else entry.name
                    if entry.is_dir(follow_symlinks=False):
                        seen.add(rel)
                        if rel not in self._dirs:
                            subdirs.append(rel)
                    elif entry.is_file(follow_symlinks=False):
                        seen.add(rel)
                        if rel not in self._files:
                            st = entry.stat(follow_symlinks=False)
                            self._files[rel] = _File(entry.path, self.start_offset(rel), st.st_size, st.st_mtime)
                            self._note_growth(reldir, rel)
        except OSError as e:  # the directory went away (or is unreadable): its files are followed no more
            log.debug("cannot scan %s: %s", self._abs(reldir), e)
            return
        for rel in self._entries.get(reldir, set()) - seen:
            self._forget(rel)
        self._entries[reldir] = seen
        for rel in subdirs:
            self._visit(rel)

    def _forget(self, rel: str) -> None:
        """Stop following a vanished file, or a vanished directory and everything under it."""
        if self._files.pop(rel, None) is not None:
            parent = rel.rpartition("/")[0]
            if self._newest.get(parent) == rel:
                del self._newest[parent]
        if self._dirs.pop(rel, None) is not None:
            for child in self._entries.pop(rel, set()):
                self._forget(child)
            self._newest.pop(rel, None)

    def _note_growth(self, reldir: str, rel: str) -> None:
        newest = self._newest.get(reldir)
        if newest is None or newest not in self._files or self._files[rel].changed >= self._files[newest].changed:
            self._newest[reldir] = rel

    # -- files ---------------------------------------------------------------------------------
    def _to_check(self, full: bool) -> list[str]:
        if full:
            return [rel for rel, f in self._files.items() if not f.frozen]
        now = time.monotonic()
        newest = set(self._newest.values())
        pending, recent, cold = [], [], []
        for rel, f in self._files.items():
            if f.frozen:
                continue
            if f.size != f.offset:
                pending.append(rel)
            elif rel in newest or now - f.changed < self.hot_secs:
                recent.append(rel)
            else:
                cold.append(rel)
        if len(recent) > self.max_hot:
            recent.sort(key=lambda rel: self._files[rel].changed, reverse=True)
            cold += recent[self.max_hot:]
            del recent[self.max_hot:]
        if cold:
            n = math.ceil(len(cold) / self.cold_every)
            start = self._cold_cursor % len(cold)
            recent += (cold[start:] + cold[:start])[:n]
            self._cold_cursor = start + n
        return pending + recent

    def _read_new(self, rel: str, f: _File, budget: int) -> Chunk | None:
        try:
            size = os.stat(f.path).st_size
        except OSError as e:  # removed meanwhile: _scan forgets it
            log.debug("cannot stat %s: %s", f.path, e)
            return None
        if size > f.size:
            f.changed = time.monotonic()
            self._note_growth(rel.rpartition("/")[0], rel)
        f.size = size
        if size < f.offset:
            log.warning("%s shrank from %d to %d bytes; it is no longer followed", f.path, f.offset, size)
            f.frozen = True
            return None
        if size == f.offset:
            return None
        try:
            with open(f.path, "rb") as fh:
                fh.seek(f.offset)
                data = fh.read(min(size - f.offset, budget))
        except OSError as e:  # removed meanwhile: _scan forgets it
            log.debug("cannot read %s: %s", f.path, e)
            return None
        if not data:
            return None
        chunk = Chunk(rel, f.offset, data)
        f.offset += len(data)
        return chunk

    def _abs(self, rel: str) -> str:
        return os.path.join(self.root, *rel.split("/")) if rel else self.root
