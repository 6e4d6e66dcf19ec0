"""The errors both ends raise: a bad control-channel connection, and feeding that failed. The
driver's errors (``driver/errors.py``) include these, and every error derives from ``TFOSError``."""

from __future__ import annotations

from ...errors import TFOSError

__all__ = ["ChannelError", "DataError", "FeedError", "FeedTimeout"]


class ChannelError(TFOSError):
    """A control-channel connection failed authentication or sent a bad frame."""


class FeedError(TFOSError):
    """Feeding Spark data into the nodes (InputMode.SPARK) failed; the message names the node or
    partition and what to do."""


class DataError(FeedError):
    """The data's own rows cannot be fed as they are (a type the first row does not give, a row
    unlike the first); the message names the column and the fix. Found by the task that reads the
    rows; in-stage, the node's function raises it too, where it reads the feed."""


class FeedTimeout(FeedError):
    """A node took no data for longer than ``feed_timeout`` while Spark was feeding it."""


#: How a node's ``ExportError`` begins when the other workers did not join a model export; the
#: driver recognises the failure by it (``diagnosis/nodes.diagnose_failure``).
EXPORT_PEERS_MISSING = "the other workers did not join the model export"
