"""What every message is (:class:`Message`), how one is declared, and its encoding, for the control
channel and the data feed alike.

A message is a class decorated by its protocol's ``message``, with a ``TYPE`` (its tag on the
wire) and its fields declared once, as annotations (with defaults for the optional ones); it
becomes a frozen dataclass, and the checks that decoding applies to each field are derived from
its annotation when the class is declared (``checks.py`` says what each annotation accepts), so
that decoding a message costs a dictionary lookup and one call per field.

On the wire a message is a map ``{"type": TYPE, field: value, ...}``: msgpack on a channel
(``channel.py``), or one JSON line on the child's status pipe (:func:`to_json`). Decoding
validates every field and raises ``ChannelError`` naming the message and the field, so a handler
only ever sees a well-formed message; nothing is unpickled.

Two protocols: :data:`CONTROL`, between the driver and its nodes (``reports.py`` node -> driver,
``orders.py`` driver -> node, :mod:`.messages` holds them all; :func:`decode` knows a message
once its module was imported), and the data feed's (``feed/messages.py``).

Imports nothing but the standard library: the nodes' child processes use it.
"""

from __future__ import annotations

import json
import typing
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, TypeVar

from .checks import Check, check_for
from .errors import ChannelError


class Message:
    """Base of every message: ``TYPE`` is its tag on the wire; ``FIELDS`` is derived from its
    annotations when it is declared: ``(name, check, required)`` per field, in order."""

    TYPE: ClassVar[str] = ""
    FIELDS: ClassVar[tuple[tuple[str, Check, bool], ...]] = ()


M = TypeVar("M", bound=Message)


class Protocol:
    """The messages one channel speaks, by tag: declares them (:meth:`message`) and decodes them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.types: dict[str, type[Message]] = {}

    def message(self, cls: type[M]) -> type[M]:
        """Make ``cls`` a frozen dataclass whose fields are checked as annotated, known to
        :meth:`decode` by its ``TYPE``."""
        if not cls.TYPE or cls.TYPE in self.types:
            raise TypeError(f"{cls.__name__}: TYPE {cls.TYPE!r} is empty or already a {self.name} message's")
        cls = dataclass(frozen=True)(cls)
        hints = typing.get_type_hints(cls, include_extras=True)
        derived = []
        for f in fields(cls):
            try:
                check = check_for(hints[f.name])
            except TypeError as e:
                raise TypeError(f"{cls.__name__}.{f.name}: {e}") from None
            derived.append((f.name, check, f.default is MISSING and f.default_factory is MISSING))
        cls.FIELDS = tuple(derived)
        self.types[cls.TYPE] = cls
        return cls

    def decode(self, raw: Any) -> Message:
        """The message in the wire map ``raw``; raises ``ChannelError`` naming what is wrong."""
        if not isinstance(raw, dict):
            raise ChannelError(f"malformed message: expected a map, got {type(raw).__name__}")
        kind = raw.get("type")
        cls = self.types.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise ChannelError(f"malformed message: unknown type {str(kind)[:40]!r}")
        values = {}
        for name, check, required in cls.FIELDS:
            if name not in raw:
                if required:
                    raise ChannelError(f"malformed {kind!r} message: no {name!r}")
                continue
            try:
                values[name] = check(raw[name])
            except (TypeError, ValueError) as e:
                raise ChannelError(f"malformed {kind!r} message: field {name!r}: {e}") from None
        return cls(**values)


#: The control protocol, between the driver and its nodes.
CONTROL = Protocol("control")
message = CONTROL.message
decode = CONTROL.decode


def encode(msg: Message) -> dict:
    """The wire map of ``msg`` (its field values as they are: nothing is copied)."""
    out: dict[str, Any] = {"type": msg.TYPE}
    for name, _, _ in msg.FIELDS:
        out[name] = getattr(msg, name)
    return out


def to_json(msg: Message) -> str:
    """One JSON line (the child's status pipe carries step and feed reports this way)."""
    return json.dumps(encode(msg))


def from_json(line: str | bytes) -> Message:
    """The control message in one JSON line; ``ChannelError`` when it is not one."""
    try:
        raw = json.loads(line)
    except ValueError as e:
        raise ChannelError(f"malformed status line: {e}") from None
    return decode(raw)
