"""A finding: one reason a launch cannot proceed or should worry the user, with its evidence and
remedy. ``diagnosis/diagnose.py`` finds them in a snapshot of the cluster, ``diagnosis/nodes.py``
in what the nodes report; they reach every consumer in ``FindingRaised`` events, and the errors a
user meets carry them (``driver/errors.py``)."""

from __future__ import annotations

from dataclasses import dataclass

BLOCKER = "blocker"
WARNING = "warning"


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One diagnosis: a ``code`` for programs, the ``cause`` in words, the ``evidence`` it rests
    on, and the ``remedy``. A ``blocker`` means the launch cannot succeed as asked. Built by keyword
    only: a severity or an estimate flag is named where it is set."""

    code: str
    cause: str
    evidence: tuple[str, ...]
    remedy: str
    severity: str = BLOCKER
    estimated: bool = False  # rests on estimated figures (Spark Connect: no scheduler state to read)
    subject: str = ""  # what it is about (a node), where its figures change while the news does not

    def describe(self, head: str = "", evidence: bool = True, sep: str = "\n    ") -> str:
        """The finding as text: ``head`` and the cause, then (with ``evidence``) each evidence line
        and the fix, each after ``sep`` (by default indented lines below the cause)."""
        cause = f"{self.cause} (estimate)" if self.estimated else self.cause
        parts = [f"{head}{cause}", *(f"evidence: {e}" for e in self.evidence if evidence), f"fix: {self.remedy}"]
        return sep.join(parts)


def blockers(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == BLOCKER]


def tail(text: str, lines: int = 6) -> str:
    """The last ``lines`` meaningful lines of an error, JVM stack frames left out."""
    kept = [line.strip() for line in text.strip().splitlines()
            if line.strip() and not line.strip().startswith(("at ", "... "))][-lines:]
    return " | ".join(kept)
