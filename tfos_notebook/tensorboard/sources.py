"""Where a mirror's bytes come from when the run's log directory is readable from the driver.

- ``LocalSource``: a local or FUSE-mounted directory (``/Volumes/...``, ``/dbfs/...``; a ``dbfs:/``
  URI through its mount when the driver has it), followed with a ``DirTail``.
- ``HadoopSource``: any Hadoop filesystem (``hdfs://``, ``dbfs:/``, ``s3a://``, ``abfss://``,
  ``file://``...) through the Spark backend's Hadoop filesystems (the Hadoop FileSystem API of
  the SparkContext's JVM), so it uses the cluster's own configuration and credentials.
- ``FsspecSource``: any fsspec URL (``s3://``, ``gs://``, ``memory://``...).

Each gives, per call to ``changes(have)``, the bytes past ``have(relpath)`` (what the mirror holds)
for every file, a bounded amount per call.
"""

from __future__ import annotations

import os
import posixpath
import urllib.parse
from collections.abc import Callable
from typing import Any

from ..runtime.driver.errors import TFOSError
from ..runtime.driver.spark import backend_for
from ..runtime.host.filetail import DEFAULT_MAX_BYTES, Chunk, DirTail
from ..runtime.host.fuse import FuseError, fuse_path
from ..runtime.host.paths import HADOOP_SCHEMES

Have = Callable[[str], int]


class LogdirError(TFOSError, ValueError):
    """A log directory cannot be read from the driver."""


class LocalSource:
    """A directory on the driver's filesystem (local disk or a FUSE mount such as ``/Volumes``)."""

    def __init__(self, root: str, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._tail: DirTail | None = None

    def changes(self, have: Have, full: bool = False) -> list[Chunk]:
        if self._tail is None:
            self._tail = DirTail(self.root, start_offset=have, max_bytes=self.max_bytes)
        return self._tail.scan(full)

    def rewind(self, relpath: str, offset: int) -> None:
        if self._tail is not None:
            self._tail.rewind(relpath, offset)

    def __repr__(self) -> str:
        return f"LocalSource({self.root!r})"


class _ListingSource:
    """A source that lists file sizes and reads byte ranges: every call compares the listing with
    what the mirror holds, so it needs no state of its own."""

    max_bytes = DEFAULT_MAX_BYTES

    def list_sizes(self) -> dict[str, int]:
        raise NotImplementedError

    def read(self, relpath: str, offset: int, length: int) -> bytes:
        raise NotImplementedError

    def changes(self, have: Have, full: bool = False) -> list[Chunk]:
        chunks, budget = [], self.max_bytes
        for rel, size in sorted(self.list_sizes().items()):
            held = have(rel)
            if size <= held:
                continue
            if budget <= 0:
                break
            data = self.read(rel, held, min(size - held, budget))
            if data:
                chunks.append(Chunk(rel, held, data))
                budget -= len(data)
        return chunks

    def rewind(self, relpath: str, offset: int) -> None:
        """Nothing to do: every call starts from what the mirror holds."""


class HadoopSource(_ListingSource):
    """A directory on any Hadoop filesystem, read through the cluster's Spark backend (the JVM of a
    SparkContext) with the cluster's own configuration and credentials.

    Hadoop's checksum side files (``.NAME.crc``) are not mirrored.
    """

    def __init__(self, spark: Any, uri: str, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.uri, self.max_bytes = uri, max_bytes
        self._fs = backend_for(spark).hadoop_fs(uri)

    def list_sizes(self) -> dict[str, int]:
        return self._fs.list_sizes()

    def read(self, relpath: str, offset: int, length: int) -> bytes:
        return self._fs.read(relpath, offset, length)

    def __repr__(self) -> str:
        return f"HadoopSource({self.uri!r})"


class FsspecSource(_ListingSource):
    """A directory behind any fsspec URL; ``storage_options`` go to the filesystem."""

    def __init__(self, url: str, max_bytes: int = DEFAULT_MAX_BYTES, **storage_options) -> None:
        import fsspec

        self.url, self.max_bytes = url, max_bytes
        self._fs, root = fsspec.core.url_to_fs(url, **storage_options)
        self._root = root.rstrip("/") or "/"

    def list_sizes(self) -> dict[str, int]:
        self._fs.invalidate_cache(self._root)
        try:  # not exists() first: fsspec 2023.6 (Databricks 14.3's) says a directory made by its files' paths does not exist
            found = self._fs.find(self._root, detail=True)
        except FileNotFoundError:
            return {}
        return {posixpath.relpath(path, self._root): int(info["size"])
                for path, info in found.items() if info.get("type") == "file"}

    def read(self, relpath: str, offset: int, length: int) -> bytes:
        return self._fs.cat_file(f"{self._root}/{relpath}", start=offset, end=offset + length)

    def __repr__(self) -> str:
        return f"FsspecSource({self.url!r})"


def is_uri(logdir: str) -> bool:
    """Whether ``logdir`` names a filesystem by scheme (``hdfs://``, ``dbfs:/``, ``s3a://``...)
    rather than a local path."""
    return "://" in logdir or logdir.startswith("dbfs:")


def files_path(uri: str) -> str | None:
    """The local path of ``uri`` where the driver sees it as files: ``file://`` URIs, and
    ``dbfs:/`` URIs through Databricks' FUSE mounts when the driver has them; else None."""
    if uri.startswith("file://"):
        return urllib.parse.urlparse(uri).path
    if uri.startswith("dbfs:"):
        try:
            return fuse_path(uri)
        except FuseError:  # no mount here: the JVM may still read it (a classic session)
            return None
    return None


def open_source(logdir: str, sc: Any = None,
                backend: str = "auto") -> LocalSource | HadoopSource | FsspecSource:
    """The source that reads ``logdir`` from the driver.

    Args:
        logdir: a local or FUSE path (``/Volumes/main/ml/runs/x``), a Hadoop URI (``hdfs://``,
            ``dbfs:/``, ``s3a://``, ``file://``...) or an fsspec URL.
        sc: the Spark that reads Hadoop URIs (a SparkContext, a SparkSession or a ``SparkBackend``);
            without it they go through fsspec. ``auto`` reads ``dbfs:/`` through Databricks' FUSE
            mounts where the driver has them, else through the JVM of a classic session; a Spark
            Connect session has no JVM here, so ``auto`` then reads ``file://`` locally and other
            URIs through fsspec.
        backend: ``auto`` (local paths locally, Hadoop schemes through ``sc``, the rest through
            fsspec), or force ``local``, ``hadoop`` or ``fsspec``.

    Raises:
        LogdirError: the backend cannot be used for this log directory.
        FuseError: a path under ``/Volumes`` or ``/dbfs`` whose mount the driver lacks.
    """
    if backend not in ("auto", "local", "hadoop", "fsspec"):
        raise LogdirError(f"backend must be 'auto', 'local', 'hadoop' or 'fsspec', got {backend!r}")
    has_scheme = is_uri(logdir)
    if backend == "local" or (backend == "auto" and not has_scheme):
        if has_scheme:
            raise LogdirError(f"{logdir!r} is a URI, not a local path: use backend='hadoop' or 'fsspec'")
        return LocalSource(os.path.abspath(fuse_path(logdir)))
    spark = None if sc is None else backend_for(sc)
    local = files_path(logdir) if backend == "auto" else None
    if local is not None and (logdir.startswith("dbfs:") or (spark is not None and spark.kind == "connect")):
        return LocalSource(local)  # a FUSE mount, or (with no JVM to ask) the local file system
    if backend == "hadoop" or (backend == "auto" and spark is not None and spark.kind == "classic"
                               and logdir.startswith(HADOOP_SCHEMES)):
        if spark is None:
            raise LogdirError(f"reading {logdir!r} through Hadoop needs the SparkContext: pass sc=")
        try:
            return HadoopSource(spark, logdir)
        except NotImplementedError as e:  # a Spark Connect session
            raise LogdirError(str(e)) from None
    try:
        return FsspecSource(logdir)
    except (ImportError, ValueError, OSError) as e:  # no fsspec, unknown protocol, or it cannot connect
        raise LogdirError(f"cannot read {logdir!r} through fsspec ({type(e).__name__}: {str(e)[:300]}): pass "
                          "sc= to read Hadoop URIs through Spark, or install fsspec and its implementation "
                          "for this scheme") from e
