"""How ``Run`` answers for the parts it owns: members of the run that are the same-named members
of one of its parts, listed where ``Run`` is defined (``@forward("outcome", RunOutcome, "state",
"wait", ...)``), so that the part is an object of its own, built with its collaborators, rather
than a mixin reading the run's attributes."""

from __future__ import annotations

import inspect
from typing import Any


class Forward:
    """``obj.<name>`` is ``obj.<part>.<name>`` (a property, method or attribute, documented on the
    part's class ``source``); ``settable``: assigning ``obj.<name>`` assigns the part's."""

    def __init__(self, part: str, name: str, source: type, settable: bool = False) -> None:
        self.part, self.name, self.settable = part, name, settable
        member = inspect.getattr_static(source, name, None)
        self.__doc__ = member.__doc__ if isinstance(member, (property, staticmethod)) or inspect.isfunction(member) \
            else f"``{part}.{name}`` (see :class:`{source.__module__}.{source.__qualname__}`)."

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else getattr(getattr(obj, self.part), self.name)

    def __set__(self, obj: Any, value: Any) -> None:
        if not self.settable:
            raise AttributeError(f"{self.name} is {self.part}'s, read-only here")
        setattr(getattr(obj, self.part), self.name, value)


def forward(part: str, source: type, *names: str, settable: bool = False):
    """A class decorator: each of ``names`` is a :class:`Forward` to the attribute ``part``, an
    instance of ``source``."""
    def decorate(cls: type) -> type:
        for name in names:
            if name in vars(cls):
                raise TypeError(f"{cls.__name__}.{name} is its own, not {part}'s")
            setattr(cls, name, Forward(part, name, source, settable))
        return cls
    return decorate
