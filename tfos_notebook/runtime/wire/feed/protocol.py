"""The data feed's wire protocol, and the client that Spark tasks and the driver use to speak it.

Each training node (chief and workers) serves its own data feed when the run's input mode is
``spark``. A connection is authenticated exactly like the control channel (same framing, same
per-run secret, no pickle); record batches travel as Arrow IPC streams inside msgpack ``bin``
fields, one batch per frame, sent without copying. Messages (field ``t``):

client -> node
    ``sample``     {pass, data}: one row (or just the schema) of the data about to be fed; the
                   nodes derive ``ctx.dataset``'s element types from it.
    ``open``       {pass, part, attempt, mode}: a Spark task starts feeding partition ``part``
                   (``mode`` is ``train`` or ``infer``). Reply ``ready`` {skip}: rows of this
                   partition the node already holds from an earlier attempt (-1: all of them);
                   or ``stopped`` when the node terminated its feed.
    ``rows``       {n, data}: a record batch.
    ``rows_file``  {n, path, offset, length}: a record batch that the node reads itself, at that
                   place in an Arrow IPC stream file on its own host (an in-stage task's partition
                   spill, ``wire/feed/spill.py``). Reply ``ok`` once the node holds it, or
                   ``stopped`` when it terminated its feed.
    ``done``       {rows}: the partition is complete; a training node replies ``ack``.
    ``epoch_end``  {pass}, ``end``: from the driver, after a pass / when no more data will come.
    ``fail``       {message}: an in-stage task cannot read its partition's rows (a ``DataError``):
                   the node's function raises it where it reads the feed, after the rows before.
node -> client
    ``terminated`` the node called ``terminate()``: stop feeding (unsolicited on training feeds).
    ``results``    {n, data}: predictions for the next ``n`` rows this connection sent.
    ``error``      {message}: the node refused a request.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import pyarrow as pa

from .. import channel
from ..errors import ChannelError, FeedError
from .codec import batch_bytes

MAX_FRAME = 256 << 20
FRAME_BYTES = 4 << 20  # target size of one record batch on the wire
CONNECT_TIMEOUT = 30.0


@dataclass(frozen=True)
class SpillEntry:
    """Where one record batch of ``rows`` rows is in a spill file: ``length`` bytes at ``offset``."""

    path: str
    offset: int
    length: int
    rows: int

    @property
    def num_rows(self) -> int:  # as a record batch says it
        return self.rows


class FeedClient:
    """One authenticated connection to a node's data feed.

    ``timeout`` bounds every blocking send or receive: a node that takes no data for that long
    makes the call raise ``TimeoutError``.
    """

    def __init__(self, address: tuple[str, int], secret: channel.Secret, timeout: float | None) -> None:
        self.address = address
        self.conn = channel.connect(address[0], int(address[1]), secret,
                                    timeout=CONNECT_TIMEOUT if timeout is None else min(timeout, CONNECT_TIMEOUT),
                                    max_frame=MAX_FRAME)
        self.conn.sock.settimeout(timeout)
        self.terminated = False

    def request(self, msg: dict) -> dict:
        """Send ``msg`` and return the node's reply (skipping ``terminated`` notices)."""
        self.conn.send(msg)
        return self.reply()

    def reply(self) -> dict:
        while True:
            msg = self.conn.recv()
            kind = msg.get("t")
            if kind == "terminated":
                self.terminated = True
                continue
            if kind == "error":
                raise FeedError(f"the node at {self.address[0]}:{self.address[1]} refused the feed: "
                                f"{msg.get('message')}")
            return msg

    def send_rows(self, batch: pa.RecordBatch) -> None:
        self.conn.send_with_bin({"t": "rows", "n": batch.num_rows}, "data", batch_bytes(batch))

    def send_rows_file(self, entry: SpillEntry) -> bool:
        """Have the node read the batch at ``entry`` of a spill on its host; False when it
        terminated its feed (it holds the batch otherwise)."""
        reply = self.request({"t": "rows_file", "n": entry.rows, "path": entry.path, "offset": entry.offset,
                              "length": entry.length})
        return reply.get("t") == "ok"

    def poll_notice(self) -> bool:
        """True once the node said ``terminated`` (checked without blocking)."""
        while not self.terminated:
            if not self.conn.readable():
                break
            if self.conn.recv().get("t") == "terminated":
                self.terminated = True
        return self.terminated

    def recv(self) -> dict:
        return self.conn.recv()

    def close(self) -> None:
        self.conn.close()


def tell(address: tuple[str, int], secret: channel.Secret, msg: dict, timeout: float = CONNECT_TIMEOUT) -> dict:
    """Send one control message (``sample``, ``epoch_end``, ``end``) to a node and return its reply."""
    client = FeedClient(address, secret, timeout)
    try:
        return client.request(msg)
    finally:
        client.close()


CONNECTION_ERRORS = (OSError, ConnectionError, ChannelError, socket.timeout)
