"""The data feed's wire protocol, and the client that Spark tasks and the driver use to speak it.

Each training node (chief and workers) serves its own data feed when the run's input mode is
``spark``. A connection is authenticated exactly like the control channel (same framing, same
per-run secret, no pickle); record batches travel as Arrow IPC streams inside msgpack ``bin``
fields, one batch per frame, sent without copying (:func:`send`). The messages are declared in
``messages.py``, as the control channel's are: a map ``{"type": TYPE, field: value, ...}``, every
field checked on decode. What each says, and its answer:

client -> node
    ``sample``     {pass_id, data}: one row (or just the schema) of the data about to be fed; the
                   nodes derive ``ctx.dataset``'s element types from it.
    ``open``       {pass_id, part, attempt, mode}: a Spark task starts feeding partition ``part``
                   (``mode`` is ``train`` or ``infer``). Reply ``ready`` {skip}: rows of this
                   partition the node already holds from an earlier attempt (-1: all of them);
                   or ``stopped`` when the node terminated its feed.
    ``rows``       {n, data}: a record batch (never answered).
    ``rows_file``  {n, path, offset, length}: a record batch that the node reads itself, at that
                   place in an Arrow IPC stream file on its own host (an in-stage task's partition
                   spill, ``wire/feed/spill.py``). Reply ``ok`` once the node holds it, or
                   ``stopped`` when it terminated its feed.
    ``done``       {rows}: the partition is complete; a training node replies ``ack`` {terminated}.
    ``epoch_end``  {pass_id}, ``end``: from the driver, after a pass / when no more data will come.
    ``fail``       {message}: an in-stage task cannot read its partition's rows (a ``DataError``):
                   the node's function raises it where it reads the feed, after the rows before.
node -> client
    ``ok``         the request was done (``sample``, ``epoch_end``, ``end``, ``fail``, ``rows_file``).
    ``terminated`` the node called ``terminate()``: stop feeding (unsolicited on training feeds).
    ``results``    {n, data}: predictions for the next ``n`` rows this connection sent.
    ``error``      {message}: the node refused a request (a malformed ``rows`` is refused unanswered).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import pyarrow as pa

from .. import channel
from ..errors import ChannelError, FeedError
from ..message import Message, encode
from . import messages as fm
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


def send(conn: channel.Connection, msg: Message) -> None:
    """Send ``msg`` on ``conn``; its record batch (``data``: any bytes-like, an Arrow buffer...)
    goes as a msgpack ``bin`` field written to the socket without first copying it into the frame."""
    raw = encode(msg)
    data = raw.pop("data", None)
    if data is None:
        conn.send(raw)
    else:
        conn.send_with_bin(raw, "data", data)


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

    def send(self, msg: Message) -> None:
        send(self.conn, msg)

    def request(self, msg: Message) -> Message:
        """Send ``msg`` and return the node's reply (skipping ``terminated`` notices)."""
        self.send(msg)
        return self.reply()

    def reply(self) -> Message:
        while True:
            msg = self.recv()
            if isinstance(msg, fm.Terminated):
                self.terminated = True
                continue
            if isinstance(msg, fm.Error):
                raise FeedError(f"the node at {self.address[0]}:{self.address[1]} refused the feed: {msg.message}")
            return msg

    def send_rows(self, batch: pa.RecordBatch) -> None:
        self.send(fm.Rows(batch.num_rows, batch_bytes(batch)))

    def send_rows_file(self, entry: SpillEntry) -> bool:
        """Have the node read the batch at ``entry`` of a spill on its host; False when it
        terminated its feed (it holds the batch otherwise)."""
        return isinstance(self.request(fm.RowsFile(entry.rows, entry.path, entry.offset, entry.length)), fm.Ok)

    def poll_notice(self) -> bool:
        """True once the node said ``terminated`` (checked without blocking)."""
        while not self.terminated:
            if not self.conn.readable():
                break
            if isinstance(self.recv(), fm.Terminated):
                self.terminated = True
        return self.terminated

    def recv(self) -> Message:
        """The node's next message; ``ChannelError`` when it is not a well-formed one."""
        return fm.decode(self.conn.recv())

    def close(self) -> None:
        self.conn.close()


def tell(address: tuple[str, int], secret: channel.Secret, msg: Message, timeout: float = CONNECT_TIMEOUT) -> Message:
    """Send one message (``Sample``, ``EpochEnd``, ``End``, ``Fail``) to a node and return its reply."""
    client = FeedClient(address, secret, timeout)
    try:
        return client.request(msg)
    finally:
        client.close()


CONNECTION_ERRORS = (OSError, ConnectionError, ChannelError, socket.timeout)
