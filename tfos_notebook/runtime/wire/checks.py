"""The checks that decoding a message applies to its fields, derived from each field's annotation
(:func:`check_for`): a check takes a decoded wire value and returns it (or its tuple form) when it
has the annotated shape, or raises ``TypeError`` / ``ValueError`` naming what it got, which
``message.py`` turns into a ``ChannelError`` naming the message and the field.

What an annotation says on the wire:

- ``int``: an integer, not a bool; ``float``: a number (an integer too), returned as a float;
  ``str``, ``bool``; ``bytes``: a msgpack ``bin``, returned as msgpack handed it (never copied:
  record batches of megabytes travel this way);
- ``X | None``; ``Literal["a", "b"]``: one of those values;
- ``tuple[X, ...]`` and ``list[X]``: a list of ``X`` (returned as a tuple, or a list);
  ``tuple[X, Y]``: a list of exactly those items; ``dict[K, V]``: a map;
- a ``TypedDict``: a map with at least its required keys, each checked (other keys are dropped);
- ``Annotated[X, check, ...]``: ``X``, then each ``check`` in turn, for what a type alone cannot
  say (:data:`Offset`: an integer that is 0 or more).

Imports nothing but the standard library: the nodes' child processes use it.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union

Check = Callable[[Any], Any]  # a wire value in, the checked value out


def integer(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {type(v).__name__}")
    return v


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
    return v


def not_negative(v: int) -> int:
    if v < 0:
        raise ValueError(f"expected an offset (0 or more), got {v}")
    return v


#: An integer that is 0 or more: a byte offset, a count, a step.
Offset = Annotated[int, not_negative]

_SCALARS: dict[Any, Check] = {int: integer, float: number, str: string, bool: boolean, bytes: blob}


def _optional(item: Check) -> Check:
    def check(v: Any) -> Any:
        return None if v is None else item(v)

    return check


def _one_of(allowed: tuple) -> Check:
    def check(v: Any) -> Any:
        # a bool is an int to ``in`` (True == 1): compare types as well as values
        if not any(type(v) is type(a) and v == a for a in allowed):
            raise ValueError(f"expected one of {', '.join(map(repr, allowed))}, got {str(v)[:40]!r}")
        return v

    return check


def _seq(item: Check, kind: type) -> Check:
    def check(v: Any) -> Any:
        if not isinstance(v, (list, tuple)):
            raise TypeError(f"expected a list, got {type(v).__name__}")
        return kind(item(x) for x in v)

    return check


def _fixed(items: tuple[Check, ...]) -> Check:
    def check(v: Any) -> tuple:
        if not isinstance(v, (list, tuple)) or len(v) != len(items):
            raise TypeError(f"expected a list of {len(items)} items")
        return tuple(c(x) for c, x in zip(items, v, strict=True))

    return check


def _mapping(key: Check, value: Check) -> Check:
    def check(v: Any) -> dict:
        if not isinstance(v, dict):
            raise TypeError(f"expected a map, got {type(v).__name__}")
        return {key(k): value(x) for k, x in v.items()}

    return check


def _record(name: str, spec: tuple[tuple[str, Check, bool], ...]) -> Check:
    def check(v: Any) -> dict:
        if not isinstance(v, dict):
            raise TypeError(f"expected a map, got {type(v).__name__}")
        out = {}
        for key, c, required in spec:
            if key in v:
                try:
                    out[key] = c(v[key])
                except (TypeError, ValueError) as e:
                    raise type(e)(f"{name} {key!r}: {e}") from None
            elif required:
                raise ValueError(f"{name} without {key!r}")
        return out

    return check


def _chain(first: Check, then: tuple[Check, ...]) -> Check:
    def check(v: Any) -> Any:
        v = first(v)
        for c in then:
            v = c(v)
        return v

    return check


def check_for(tp: Any) -> Check:
    """The check of a field annotated ``tp`` (evaluated, as ``typing.get_type_hints`` returns it
    with ``include_extras``); ``TypeError`` for an annotation the wire cannot carry."""
    if tp in _SCALARS:
        return _SCALARS[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        extra = tuple(tp.__metadata__)
        if not all(callable(c) for c in extra):
            raise TypeError(f"Annotated[...] takes checks (callables), got {extra!r}")
        return _chain(check_for(args[0]), extra)
    if origin in (Union, types.UnionType):
        rest = tuple(a for a in args if a is not type(None))
        if len(rest) != 1 or len(args) != 2:
            raise TypeError(f"no wire check for {tp!r}: only X | None unions")
        return _optional(check_for(rest[0]))
    if origin is Literal:
        return _one_of(args)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _seq(check_for(args[0]), tuple)
    if origin is tuple and args and Ellipsis not in args:
        return _fixed(tuple(check_for(a) for a in args))
    if origin is list and len(args) == 1:
        return _seq(check_for(args[0]), list)
    if origin is dict and len(args) == 2:
        return _mapping(check_for(args[0]), check_for(args[1]))
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp, include_extras=True)
        return _record(tp.__name__, tuple((k, check_for(t), k in tp.__required_keys__) for k, t in hints.items()))
    raise TypeError(f"no wire check for {tp!r}")
