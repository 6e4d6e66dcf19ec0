"""The control messages the driver sends its nodes (see :mod:`.messages`)."""

from __future__ import annotations

from .checks import Offset
from .message import Message, message


@message
class Cluster(Message):
    """Every node registered: the cluster spec (``role -> ["host:port", ...]``)."""

    TYPE = "cluster"
    cluster_spec: dict[str, list[str]]
    model_dir_shared: bool = True  # every node sees the driver's model dir (``ctx.model_dir_shared``)


@message
class NodeAnswer(Message):
    """The answer to a ``NodeQuery``: the node's state and, if it failed, why (one line or a few)."""

    TYPE = "node_answer"
    state: str
    failure: str = ""


@message
class Ping(Message):
    """The driver's heartbeat: the node answers with a ``Pong``. A node that hears none for
    ``DRIVER_SILENT_SECS`` takes the driver for lost and ends its process."""

    TYPE = "ping"
    seq: int


@message
class Stop(Message):
    """Stop the node's process (its process group); with ``stacks`` (the run failed elsewhere), its
    Python stacks go to its log first, to show where it was."""

    TYPE = "stop"
    stacks: bool = False


@message
class Profile(Message):
    """Capture a TensorFlow profiler trace of the running function for ``seconds`` or, when
    ``steps`` > 0, for that many training steps; name it ``session`` (see ``ProfileDone``)."""

    TYPE = "profile"
    session: str
    seconds: float = 0.0
    steps: Offset = 0


@message
class FilesResend(Message):
    """A mirror was attached: send every file again from the start."""

    TYPE = "files_resend"


@message
class FilesRewind(Message):
    """The driver lacks the bytes before these offsets: send again from there."""

    TYPE = "files_rewind"
    files: dict[str, Offset]
    area: str = ""




# -- the decommission checkpoint (see runtime/driver/run/decommission.py) -------------------------------
@message
class SaveSoon(Message):
    """An executor of the run is leaving (``notice`` says which): at its next step boundary, the
    node's training loop says where it is (``AtBoundary``) and waits for the step to save at."""

    TYPE = "save_soon"
    notice: str


@message
class SaveAt(Message):
    """Save a checkpoint at the end of step ``step`` (every node acknowledges: ``SaveAtSeen``)."""

    TYPE = "save_at"
    step: Offset


@message
class SaveGo(Message):
    """Every node knows the step to save at: a training loop held at its boundary goes on."""

    TYPE = "save_go"
