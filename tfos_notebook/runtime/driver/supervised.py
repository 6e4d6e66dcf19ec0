"""What the supervisor reads of its run (``launch.Run``), as a protocol, so that ``supervisor.py``
need not import ``launch.py``, which imports it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..wire.filetail import Chunk

if TYPE_CHECKING:
    from ..wire.plan import NodePlan
    from .events import EventStream
    from .feed.feeder import Feeder
    from .feed.instage import InStageFeed
    from .lifecycle import Lifecycle
    from .spark import SparkBackend
    from .watch import LiveDiagnosis

FileSink = Callable[[str, list[Chunk]], dict[str, int]]


class SupervisedRun(Protocol):
    """What the supervisor reads of its run (``launch.Run``)."""

    run_id: str
    name: str
    roles: list[tuple[str, int]]
    backend: SparkBackend
    events: EventStream
    lifecycle: Lifecycle
    diagnosis: LiveDiagnosis
    feeder: Feeder | None
    instage: InStageFeed | None
    model_dir: str | None
    reservation_timeout: float
    retries: int
    stall_secs: float
    stop_grace_secs: float
    background_grace_secs: float

    @property
    def attempt(self) -> int: ...

    @property
    def job_group(self) -> str: ...

    @property
    def file_sink(self) -> FileSink | None: ...

    def plan(self, attempt: int) -> NodePlan: ...

    def release(self) -> None: ...
