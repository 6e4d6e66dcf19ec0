"""A FUSE filesystem that refuses what a Databricks Unity Catalog volume refuses, for tests.

Databricks' volumes sit on cloud object storage behind a FUSE mount (``/Volumes/<catalog>/<schema>/
<volume>``): a file is written whole, from its start to its end, in one go. Databricks' pages on
files in volumes say that direct appends and random (non-sequential) writes are not supported, and
users meet ``OSError: [Errno 29] Illegal seek`` on ``open(path, "a")`` there. This mount passes
everything through to a backing directory except, each refused with that error and logged:

- opening a file to append (``O_APPEND``);
- opening an existing file to write without truncating it (writing into it in place);
- a write that does not continue where the handle's last write ended (a seek back, or a hole);
- truncating a file to anything but zero length.

Reads, directories, renames and deletes are passed through. Run as a process of its own, as root:

    python tests/volumefs.py BACKING MOUNTPOINT REFUSALS_LOG

It mounts in the foreground until unmounted (``fusermount -u`` or ``umount``); each refusal is one
line of REFUSALS_LOG. Faked: Databricks' mount itself (which no machine here can reach), from what
its documentation and its users report.
"""

from __future__ import annotations

import errno
import os
import sys
import threading

from fuse import FUSE, FuseOSError, Operations  # fusepy, over libfuse 2

REFUSED = errno.ESPIPE  # "Illegal seek", what a volume answers an append with


class VolumeLike(Operations):
    """A passthrough to ``root`` with a volume's limits on writing (see the module's docstring)."""

    def __init__(self, root: str, refusals: str) -> None:
        self.root, self.refusals = os.path.realpath(root), refusals
        self.written: dict[int, int] = {}  # file handle -> where its next write must start
        self._log_lock = threading.Lock()

    def _full(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _refuse(self, what: str, path: str) -> None:
        with self._log_lock, open(self.refusals, "a") as log:
            log.write(f"{what} {path}\n")
        raise FuseOSError(REFUSED)

    # -- what a volume limits ------------------------------------------------------------------------
    def open(self, path, flags):
        full = self._full(path)
        writing = flags & (os.O_WRONLY | os.O_RDWR)
        if flags & os.O_APPEND:
            self._refuse("append", path)
        if writing and not flags & os.O_TRUNC and os.path.exists(full) and os.path.getsize(full) > 0:
            self._refuse("write-in-place", path)
        fh = os.open(full, flags)
        self.written[fh] = 0
        return fh

    def create(self, path, mode, fi=None):
        fh = os.open(self._full(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        self.written[fh] = 0
        return fh

    def write(self, path, data, offset, fh):
        if offset != self.written.get(fh, 0):
            self._refuse(f"random-write@{offset}(expected {self.written.get(fh, 0)})", path)
        os.lseek(fh, offset, os.SEEK_SET)
        n = os.write(fh, data)
        self.written[fh] = offset + n
        return n

    def truncate(self, path, length, fh=None):
        if length:
            self._refuse(f"truncate-to-{length}", path)
        with open(self._full(path), "r+") as f:
            f.truncate(0)
        if fh is not None:
            self.written[fh] = 0

    # -- passed through -------------------------------------------------------------------------------
    def read(self, path, size, offset, fh):
        os.lseek(fh, offset, os.SEEK_SET)
        return os.read(fh, size)

    def release(self, path, fh):
        self.written.pop(fh, None)
        return os.close(fh)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        return os.fsync(fh)

    def getattr(self, path, fh=None):
        st = os.lstat(self._full(path))
        return {key: getattr(st, key) for key in ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime",
                                                   "st_nlink", "st_size", "st_uid")}

    def readdir(self, path, fh):
        return [".", "..", *os.listdir(self._full(path))]

    def access(self, path, amode):
        if not os.access(self._full(path), amode):
            raise FuseOSError(errno.EACCES)

    def chmod(self, path, mode):
        return os.chmod(self._full(path), mode)

    def chown(self, path, uid, gid):
        return os.chown(self._full(path), uid, gid)

    def mkdir(self, path, mode):
        return os.mkdir(self._full(path), mode)

    def rmdir(self, path):
        return os.rmdir(self._full(path))

    def unlink(self, path):
        return os.unlink(self._full(path))

    def rename(self, old, new):
        return os.rename(self._full(old), self._full(new))

    def utimens(self, path, times=None):
        return os.utime(self._full(path), times)

    def statfs(self, path):
        st = os.statvfs(self._full(path))
        return {key: getattr(st, key) for key in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                                   "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}


def main(argv: list[str]) -> int:
    backing, mountpoint, refusals = argv[1:4]
    open(refusals, "a").close()
    # atomic_o_trunc: open() sees O_TRUNC itself (else the kernel truncates after opening, and an
    # overwrite, which a volume takes, would look like writing into an existing file)
    FUSE(VolumeLike(backing, refusals), mountpoint, foreground=True, nothreads=False, allow_other=True,
         atomic_o_trunc=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
