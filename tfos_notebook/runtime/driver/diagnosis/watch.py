"""Live diagnosis of a run: what the nodes told about their hosts, snapshots of the cluster while
the run reserves, and findings published once each."""

from __future__ import annotations

import logging
import platform
import time
from dataclasses import replace

from ...host.orphans import Leftover
from ...host.versions import installed_versions
from ...wire.plan import node_name
from ..events import EventStream, FindingRaised
from ..events.finding import Finding, blockers
from . import preflight
from .diagnose import Snapshot, diagnose, slot_wait_finding
from .nodes import leftover_findings

log = logging.getLogger(__name__)


class LiveDiagnosis:
    """Findings of one run: each published once (by code and cause) on ``events``."""

    def __init__(self, run_id: str, backend, events: EventStream, roles: list[tuple[str, int]],
                 gpus_per_node: int, nodes_talk: bool = True) -> None:
        self.run_id, self.backend, self.events = run_id, backend, events
        self.names = tuple(node_name(r, i) for r, i in roles)
        self.gpus_per_node = gpus_per_node
        self.nodes_talk = nodes_talk
        self._security: dict | None = None  # the cluster's encryption settings, read once
        self.started_at = time.monotonic()
        self._seen: set[tuple[str, str]] = set()
        self._leftovers: dict[tuple[str, int], Leftover] = {}
        self._versions: dict[str, tuple[str, str]] = {}

    def publish(self, findings: list[Finding]) -> None:
        for f in findings:
            key = (f.code, f.cause)
            if key not in self._seen:
                self._seen.add(key)
                self.events.publish(FindingRaised(self.run_id, finding=f))

    def raised(self) -> list[Finding]:
        return [e.finding for e in self.events.events(FindingRaised)]

    def add_leftovers(self, items: tuple[dict, ...]) -> None:
        found = []
        for item in items:
            x = Leftover(**{**item, "gpus": tuple(item["gpus"])})
            if (x.host, x.pid) not in self._leftovers:
                self._leftovers[(x.host, x.pid)] = x
                found.append(x)
        if found:
            self.publish(leftover_findings(tuple(found), self.gpus_per_node))

    def add_versions(self, node: str, python: str, tensorflow: str) -> None:
        self._versions[node] = (python, tensorflow)

    @property
    def encryption(self) -> str:
        """The setting by which the cluster asks for encrypted traffic, "" when it does not."""
        return self.security["encryption"]

    @property
    def security(self) -> dict:
        if self._security is None:
            self._security = preflight.security(self.backend)
        return self._security

    def preflight(self) -> list[Finding]:
        """Findings about the cluster before anything is submitted."""
        snap = preflight.snapshot(self.backend, len(self.names), self.names, self.gpus_per_node,
                                  time.monotonic() - self.started_at, nodes_talk=self.nodes_talk, **self.security)
        return diagnose(snap)

    def snapshot(self, tag: str, registered: list[str], stalled_for: float) -> Snapshot:
        return preflight.snapshot(
            self.backend, len(self.names), self.names, self.gpus_per_node, time.monotonic() - self.started_at,
            own_group=tag, registered=tuple(registered), stalled_for=stalled_for, nodes_talk=self.nodes_talk,
            **self.security,
            leftovers=tuple(self._leftovers.values()),
            versions=tuple((name, py, tf) for name, (py, tf) in self._versions.items()),
            task_errors=self.backend.task_errors(tag),
            driver_versions=(platform.python_version(), installed_versions()["tensorflow"]),
        )

    def live(self, tag: str, registered: list[str], stalled_for: float = 0.0) -> list[Finding]:
        """A fresh diagnosis (best effort: an empty list when Spark cannot be asked now)."""
        try:
            return diagnose(self.snapshot(tag, registered, stalled_for))
        except Exception:  # the JVM may be busy or gone; diagnosis is best effort
            log.warning("run %s: live diagnosis failed", self.run_id, exc_info=True)
            return []

    def waiting_for_slots(self, tag: str, timeout: float) -> list[Finding]:
        """While the run holds its job back for want of free slots: the blockers of a fresh
        diagnosis (the cluster turned out too small), else why it waits and for what (best effort:
        an empty list when Spark cannot be asked now)."""
        try:
            snap = replace(self.snapshot(tag, [], 0.0), holders=self.backend.slot_holders())
        except Exception:  # the JVM may be busy or gone; diagnosis is best effort
            log.warning("run %s: diagnosis while waiting for slots failed", self.run_id, exc_info=True)
            return []
        return blockers(diagnose(snap)) or [slot_wait_finding(snap, timeout)]
