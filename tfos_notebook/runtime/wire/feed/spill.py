"""A node's partition spill: the Arrow file its in-stage task writes as it reads the partition
from Spark, when there are more epochs than one (see ``node/task/feed/instage.py``), and from which the
node's own data feed reads the rows.

The task and the node's process share a host, so the rows go through the file, not the socket:
the task sends a reference per record batch (``rows_file``: path, offset, length), and the node's
feed server reads the batch at that place in the file, which the host's page cache holds from the
write. Each batch crosses no socket and is not serialized again for it (Arrow IPC bytes into a
frame, the frame through the kernel twice, out of the frame again): in the first epoch the task
has written it to the file anyway, and in the later ones the task reads nothing at all.

The file is an Arrow IPC stream (a schema, then one message per batch), written with the offset
and length of each batch kept; the task deletes it when its stage ends (the node has by then
read every batch it was sent)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pyarrow as pa

from ...host.paths import spill_prefix
from .. import channel
from .protocol import SpillEntry

SPILL_NAME = "partition.arrows"


class Spill:
    """The partition's record batches in a file on this node's disk, each one's place kept."""

    def __init__(self, run_id: str, task: int) -> None:
        self.dir = tempfile.mkdtemp(prefix=spill_prefix(run_id, task, os.getpid()))
        self.path = os.path.join(self.dir, SPILL_NAME)
        self.entries: list[SpillEntry] = []
        self._sink: pa.NativeFile | None = None
        self._writer: pa.ipc.RecordBatchStreamWriter | None = None

    def tee(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``batches``, each written to the file (its place in ``entries``) before it is yielded."""
        for batch in batches:
            if self._writer is None:
                self._sink = pa.OSFile(self.path, "wb")
                self._writer = pa.ipc.new_stream(self._sink, batch.schema)
            self._writer.write_batch(batch)
            size = pa.ipc.get_record_batch_size(batch)  # the message just written, the file's last bytes
            self.entries.append(SpillEntry(self.path, self._sink.tell() - size, size, batch.num_rows))
            yield batch
        if self._writer is not None:
            self._writer.close()
            self._sink.close()

    def references(self, batches: Iterator[pa.RecordBatch]) -> Iterator[SpillEntry]:
        """Where each of ``batches`` (those :meth:`tee` yielded, in order) is in the file."""
        for k, _ in enumerate(batches):
            yield self.entries[k]

    def delete(self) -> None:
        if self._sink is not None:  # still open when the feed stopped part way
            self._sink.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class SpillReader:
    """The node's side: record batches read from a spill at the places the task sends."""

    def __init__(self, path: str) -> None:
        if os.path.basename(path) != SPILL_NAME or "-spill-" not in os.path.basename(os.path.dirname(path)) \
                or os.path.islink(path) or not os.path.isfile(path):
            raise channel.ChannelError(f"rows_file names {path!r}, which is not a partition spill")
        self.path = path
        self._file = pa.OSFile(path, "rb")
        self._schema = pa.ipc.open_stream(self._file).schema

    def batch(self, offset: int, length: int) -> pa.RecordBatch:
        try:
            return pa.ipc.read_record_batch(self._file.read_at(length, offset), self._schema)
        except (pa.ArrowException, OSError) as e:
            raise channel.ChannelError(f"rows_file: no record batch at {offset} (+{length}) of {self.path}: {e}") from None

    def close(self) -> None:
        self._file.close()
