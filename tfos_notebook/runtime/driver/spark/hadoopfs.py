"""A directory on a Hadoop filesystem, and its reading through a SparkContext's JVM (``ClassicBackend.hadoop_fs``)."""

from __future__ import annotations

import posixpath
from abc import ABC, abstractmethod
from typing import Any


class HadoopFileSystem(ABC):
    """A directory tree on a Hadoop filesystem (``hdfs://``, ``dbfs:/``, ``s3a://``...) read with the
    cluster's own configuration and credentials."""

    @abstractmethod
    def list_sizes(self) -> dict[str, int]:
        """``{relative path: size}`` of every file below the root (checksum side files excluded)."""

    @abstractmethod
    def read(self, relpath: str, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes of ``relpath`` from ``offset``."""


class JvmHadoopFileSystem(HadoopFileSystem):
    """A directory on any Hadoop filesystem, read through the JVM of a SparkContext with the
    cluster's Hadoop configuration. Hadoop's checksum side files (``.NAME.crc``) are left out."""

    def __init__(self, sc: Any, uri: str) -> None:
        self._jvm = sc._jvm
        path = self._jvm.org.apache.hadoop.fs.Path(uri)
        self._fs = path.getFileSystem(sc._jsc.hadoopConfiguration())
        self._path = path
        qualified = self._fs.makeQualified(path).toUri()
        self._scheme, self._authority = qualified.getScheme(), qualified.getAuthority()
        self._root = qualified.getPath().rstrip("/") or "/"

    def list_sizes(self) -> dict[str, int]:
        if not self._fs.exists(self._path):
            return {}
        sizes = {}
        files = self._fs.listFiles(self._path, True)
        while files.hasNext():
            status = files.next()
            full = status.getPath().toUri().getPath()
            name = posixpath.basename(full)
            if name.startswith(".") and name.endswith(".crc"):
                continue
            sizes[posixpath.relpath(full, self._root)] = int(status.getLen())
        return sizes

    def read(self, relpath: str, offset: int, length: int) -> bytes:
        # Path(scheme, authority, path) takes the name literally (a ':' in it is no scheme).
        child = self._jvm.org.apache.hadoop.fs.Path(self._scheme, self._authority, f"{self._root}/{relpath}")
        stream = self._fs.open(child)
        try:
            stream.seek(offset)
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream, int(length)))
        finally:
            stream.close()
