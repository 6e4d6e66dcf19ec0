"""What every control message is (:class:`Message`) and its encoding: a msgpack (control channel)
or JSON (the child's status pipe) map ``{"type": TYPE, field: value, ...}``, validated field by
field on the way in. The messages themselves are in ``reports.py`` (node -> driver) and
``orders.py`` (driver -> node); :mod:`.messages` holds them all, and :func:`decode` knows a
message once its module was imported."""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, ClassVar

from .checks import Check
from .errors import ChannelError


class Message:
    """Base of every control message; ``TYPE`` is its tag on the wire and ``CHECKS`` validates
    each field (a field without a check is not sent by the peer)."""

    TYPE: ClassVar[str] = ""
    CHECKS: ClassVar[dict[str, Check]] = {}


TYPES: dict[str, type] = {}


def message(cls):
    """Make ``cls`` a frozen dataclass, known to :func:`decode` by its ``TYPE``."""
    cls = dataclass(frozen=True)(cls)
    TYPES[cls.TYPE] = cls
    return cls


def encode(msg: Message) -> dict:
    """The wire map of ``msg``."""
    out = {"type": msg.TYPE}
    out.update(asdict(msg))  # type: ignore[call-overload]
    return out


def decode(raw: Any) -> Message:
    """The message in the wire map ``raw``; raises ``ChannelError`` naming what is wrong."""
    if not isinstance(raw, dict):
        raise ChannelError(f"malformed message: expected a map, got {type(raw).__name__}")
    kind = raw.get("type")
    cls = TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ChannelError(f"malformed message: unknown type {str(kind)[:40]!r}")
    values = {}
    for f in fields(cls):
        if f.name not in raw:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ChannelError(f"malformed {kind!r} message: no {f.name!r}")
            continue
        try:
            values[f.name] = cls.CHECKS[f.name](raw[f.name])
        except (TypeError, ValueError, KeyError) as e:
            raise ChannelError(f"malformed {kind!r} message: field {f.name!r}: {e}") from None
    return cls(**values)


def to_json(msg: Message) -> str:
    """One JSON line (the child's status pipe carries step and feed reports this way)."""
    return json.dumps(encode(msg))


def from_json(line: str | bytes) -> Message:
    """The message in one JSON line; ``ChannelError`` when it is not one."""
    try:
        raw = json.loads(line)
    except ValueError as e:
        raise ChannelError(f"malformed status line: {e}") from None
    return decode(raw)
