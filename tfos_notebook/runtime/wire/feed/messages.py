"""The data feed's messages (``protocol.py`` says when each one is sent and what it is answered),
declared as the control channel's are (``message.py``): one class per message, its fields
annotated once, checked on decode as annotated. :func:`decode` refuses anything else with a
``ChannelError`` naming the message and the field.

Record batches (``data``) are Arrow IPC streams in a msgpack ``bin`` field, which the sender
writes to the socket without copying it (``protocol.send``) and the receiver takes as msgpack hands
it.

Imports nothing but the standard library and the message base: the nodes' child processes use it.
"""

from __future__ import annotations

from typing import Literal

from ..checks import Offset
from ..message import Message, Protocol

#: The data feed's protocol, between the tasks (and the driver) that feed a node and its feed.
FEED = Protocol("feed")
message = FEED.message
decode = FEED.decode


# -- to the node -----------------------------------------------------------------------------------------
@message
class Sample(Message):
    """One row (or just the schema) of the data about to be fed for pass ``pass_id``: the node
    derives ``ctx.dataset``'s element types from it. Answered ``Ok``."""

    TYPE = "sample"
    pass_id: str
    data: bytes


@message
class Open(Message):
    """A Spark task starts feeding partition ``part`` of pass ``pass_id`` (its attempt
    ``attempt``). Answered ``Ready``, or ``Stopped`` when the node terminated its feed."""

    TYPE = "open"
    pass_id: str
    part: Offset
    attempt: Offset
    mode: Literal["train", "infer"]


@message
class Rows(Message):
    """A record batch of ``n`` rows. Never answered (inference rows are, by ``Results``)."""

    TYPE = "rows"
    n: Offset
    data: bytes


@message
class RowsFile(Message):
    """A record batch of ``n`` rows that the node reads itself, ``length`` bytes at ``offset`` of
    the Arrow IPC stream file ``path`` on its own host (an in-stage task's partition spill,
    ``spill.py``). Answered ``Ok`` once the node holds it, or ``Stopped``."""

    TYPE = "rows_file"
    n: Offset
    path: str
    offset: Offset
    length: Offset


@message
class Done(Message):
    """The partition is complete: ``rows`` rows in all. A training node answers ``Ack``."""

    TYPE = "done"
    rows: Offset


@message
class EpochEnd(Message):
    """From the driver (or an in-stage task): pass ``pass_id`` is fed. Answered ``Ok``."""

    TYPE = "epoch_end"
    pass_id: str


@message
class End(Message):
    """No more data will come. Answered ``Ok``."""

    TYPE = "end"


@message
class Fail(Message):
    """An in-stage task cannot read its partition's rows (a ``DataError`` saying ``message``): the
    node's function raises it where it reads the feed, after the rows before. Answered ``Ok``."""

    TYPE = "fail"
    message: str


# -- from the node ---------------------------------------------------------------------------------------
@message
class Ok(Message):
    """The request was done."""

    TYPE = "ok"


@message
class Ready(Message):
    """The answer to ``Open``: the rows of the partition the node already holds from an earlier
    attempt, to skip (-1: all of them)."""

    TYPE = "ready"
    skip: int


@message
class Stopped(Message):
    """The node terminated its feed: it takes no more rows."""

    TYPE = "stopped"


@message
class Ack(Message):
    """The answer to a training ``Done``; ``terminated``: the node terminated its feed meanwhile."""

    TYPE = "ack"
    terminated: bool


@message
class Terminated(Message):
    """The node called ``terminate()``: stop feeding (unsolicited, on training connections)."""

    TYPE = "terminated"


@message
class Results(Message):
    """Predictions (a record batch) for the next ``n`` rows this connection sent for inference."""

    TYPE = "results"
    n: Offset
    data: bytes


@message
class Error(Message):
    """The node refused a request (``message`` says why)."""

    TYPE = "error"
    message: str
