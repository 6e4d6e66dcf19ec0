"""Field checks of the control protocol: each takes a decoded wire value and returns it (or its
tuple form) when it has the expected shape, or raises ``TypeError`` / ``ValueError`` naming what it
got. ``messages.decode`` turns those into a ``ChannelError``.

Imports nothing but the standard library: the nodes' child processes use it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Check = Callable[[Any], Any]  # a wire value in, the checked value out


def integer(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {type(v).__name__}")
    return v


def offset(v: Any) -> int:
    if integer(v) < 0:
        raise ValueError(f"expected an offset (0 or more), got {v}")
    return v


def opt_integer(v: Any) -> int | None:
    return None if v is None else integer(v)


def number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"expected a number, got {type(v).__name__}")
    return float(v)


def string(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    return v


def boolean(v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"expected true or false, got {type(v).__name__}")
    return v


def blob(v: Any) -> bytes:
    if not isinstance(v, (bytes, bytearray)):
        raise TypeError(f"expected bytes, got {type(v).__name__}")
    return bytes(v)


def opt_blob(v: Any) -> bytes | None:
    return None if v is None else blob(v)


def seq(item: Check) -> Check:
    def check(v: Any) -> tuple:
        if not isinstance(v, (list, tuple)):
            raise TypeError(f"expected a list, got {type(v).__name__}")
        return tuple(item(x) for x in v)

    return check


def fixed(*checks: Check) -> Check:
    """A list of exactly ``len(checks)`` items, each checked by its own check."""

    def check(v: Any) -> tuple:
        if not isinstance(v, (list, tuple)) or len(v) != len(checks):
            raise TypeError(f"expected a list of {len(checks)} items")
        return tuple(c(x) for c, x in zip(checks, v, strict=True))

    return check


def mapping(key: Check, value: Check) -> Check:
    def check(v: Any) -> dict:
        if not isinstance(v, dict):
            raise TypeError(f"expected a map, got {type(v).__name__}")
        return {key(k): value(x) for k, x in v.items()}

    return check


def record(spec: dict[str, Check]) -> Check:
    """A map with exactly the keys of ``spec`` (missing keys are an error, extra keys are dropped)."""

    def check(v: Any) -> dict:
        if not isinstance(v, dict):
            raise TypeError(f"expected a map, got {type(v).__name__}")
        return {k: c(v[k]) for k, c in spec.items()}

    return check
