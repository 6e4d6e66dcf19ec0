"""What waits to be sent to MLflow, and how it is cut into requests MLflow accepts.

MLflow's ``log_batch`` takes at most 1000 entities per request, of which at most 100 params and
100 tags, and about 1 MB in all (``mlflow.utils.validation``). A :class:`Pending` collects metric
points, params and tags between two sends; :meth:`Pending.requests` cuts them to fit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

MAX_ENTITIES = 1000
MAX_PARAMS_OR_TAGS = 100
MAX_REQUEST_BYTES = 900_000  # under MLflow's 1 MB, with room for the JSON around the values


@dataclass(frozen=True)
class Point:
    """One metric value at ``step``, taken at ``timestamp`` (milliseconds since the epoch)."""

    key: str
    value: float
    timestamp: int
    step: int


@dataclass
class Request:
    """One ``log_batch`` call's worth."""

    metrics: list[Point] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    size: int = 0

    def fits(self, entities: int, size: int) -> bool:
        return (len(self.metrics) + len(self.params) + len(self.tags) + entities <= MAX_ENTITIES
                and self.size + size <= MAX_REQUEST_BYTES)


class Pending:
    """Metric points, params and tags waiting to be sent (a later value of a tag replaces the
    earlier one; params are sent once)."""

    def __init__(self) -> None:
        self.metrics: list[Point] = []
        self.params: dict[str, str] = {}
        self.tags: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self.metrics) + len(self.params) + len(self.tags)

    def add_metrics(self, values: dict[str, float], step: int, timestamp: int) -> None:
        self.metrics.extend(Point(k, v, timestamp, step) for k, v in values.items())

    def requests(self) -> Iterator[Request]:
        """Everything pending as requests that fit MLflow's limits; empties it."""
        request = Request()
        for kind, items in (("params", self.params), ("tags", self.tags)):
            for key, value in items.items():
                size = len(key) + len(value) + 16
                if len(getattr(request, kind)) >= MAX_PARAMS_OR_TAGS or not request.fits(1, size):
                    yield request
                    request = Request()
                getattr(request, kind)[key] = value
                request.size += size
        for point in self.metrics:
            size = len(point.key) + 64
            if not request.fits(1, size):
                yield request
                request = Request()
            request.metrics.append(point)
            request.size += size
        if request.metrics or request.params or request.tags:
            yield request
        self.metrics, self.params, self.tags = [], {}, {}
