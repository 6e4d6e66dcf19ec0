"""The control protocol: one message class per message between the driver and a node, each field
declared once, as an annotation (``message.py``).

On the wire a message is a msgpack (control channel) or JSON (the child's status pipe) map
``{"type": TYPE, field: value, ...}``. :func:`decode` validates every field as annotated and raises
``ChannelError`` on anything else, so a handler only ever sees a well-formed message; the
receiver logs and counts a malformed one and goes on (it never costs the sender its node).
Nothing here is unpickled: a node's return value travels as opaque bytes in :class:`Result`
(msgpack, or a pickle for what msgpack cannot carry: ``values.py``), which only the driver's run
decodes, reporting a value it cannot decode as that node's error.

The messages a node sends are in ``reports.py``, those the driver sends in ``orders.py``, their
base, declaration and encoding in ``message.py``, the checks each annotation stands for in
``checks.py``; all import nothing but the standard library and each other: the nodes' child
processes use them.
"""

from __future__ import annotations

from .message import CONTROL, Message, decode, encode, from_json, to_json
from .orders import (
    Cluster,
    FilesResend,
    FilesRewind,
    NodeAnswer,
    Ping,
    Profile,
    SaveAt,
    SaveGo,
    SaveSoon,
    Stop,
)
from .reports import (
    PROFILE_AREA,
    AtBoundary,
    FeedReport,
    FeedServing,
    Files,
    GpuReport,
    Leftovers,
    Logs,
    MemoryReport,
    MlflowCalls,
    ModelExport,
    NodeQuery,
    NodeStateReport,
    PaceReport,
    Pong,
    ProfileDone,
    Register,
    Result,
    SaveAtSeen,
    Saved,
    StepReport,
    SystemReport,
)

# Heartbeats: the driver pings every registered node each HEARTBEAT_SECS; a node it has not heard
# from (any message) for NODE_SILENT_SECS is lost with its host (a cut network, a frozen machine),
# and a node that has had no ping for DRIVER_SILENT_SECS ends its process (the driver is gone).
HEARTBEAT_SECS = 2.0
NODE_SILENT_SECS = 10.0
DRIVER_SILENT_SECS = 30.0


__all__ = [
    "AtBoundary", "CONTROL", "Cluster", "DRIVER_SILENT_SECS", "FeedReport", "FeedServing", "Files",
    "FilesResend", "FilesRewind", "GpuReport", "HEARTBEAT_SECS", "Leftovers", "Logs", "MemoryReport",
    "Message", "MlflowCalls", "ModelExport", "NODE_SILENT_SECS", "NodeAnswer", "NodeQuery",
    "NodeStateReport", "PROFILE_AREA", "PaceReport", "Ping", "Pong", "Profile", "ProfileDone", "Register",
    "Result", "SaveAt", "SaveAtSeen", "SaveGo", "SaveSoon", "Saved", "StepReport", "Stop", "SystemReport",
    "decode", "encode", "from_json", "to_json",
]
