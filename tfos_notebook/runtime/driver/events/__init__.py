"""The one stream of typed events that carries a run's state to every view.

The runtime publishes these; the monitor widget, the text renderer, the runs registry and the
benchmarks subscribe. Views never look at the runtime's internals, and the runtime never knows a
view exists. Every event is a frozen dataclass with the run id and a wall-clock time
(``types.py``); the stream is an :class:`EventStream` (``stream.py``).
"""

from __future__ import annotations

from .stream import EventStream
from .types import (
    AttemptEnded,
    CheckpointSaved,
    ClusterReady,
    Decommissioning,
    EpochFed,
    Event,
    FeedPlanned,
    FeedProgress,
    FindingRaised,
    GpuAssigned,
    GpuStats,
    LaunchSubmitted,
    Log,
    MlflowCalled,
    MlflowRun,
    ModelDirUnshared,
    ModelExported,
    NodeEvent,
    NodeMemory,
    Pace,
    ProfileCaptured,
    Registered,
    RunFinished,
    RunStateChanged,
    Step,
    SystemStats,
    TaskState,
    TensorBoardStarted,
)

__all__ = [
    "AttemptEnded", "CheckpointSaved", "ClusterReady", "Decommissioning", "EpochFed", "Event", "EventStream", "FeedPlanned", "FeedProgress", "FindingRaised", "GpuAssigned",
    "GpuStats", "LaunchSubmitted", "Log", "MlflowCalled", "MlflowRun", "ModelDirUnshared", "ModelExported",
    "NodeEvent", "NodeMemory", "Pace", "ProfileCaptured", "Registered", "RunFinished", "RunStateChanged", "Step", "SystemStats",
    "TaskState", "TensorBoardStarted",
]
