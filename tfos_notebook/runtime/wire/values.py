"""A node's return value on its way to the driver, pickled only where nothing else can carry it.

A function's value (``Result.value``) is what the driver returns from ``Run.wait()`` /
``TFCluster.shutdown()``. Plain values travel as msgpack, which the driver decodes without running
anything: ``None``, booleans, ints (64-bit), floats, strings, bytes, numpy arrays and scalars of a
number, boolean or byte-string dtype (dtype, shape and bytes), and tuples, lists and dicts of these
(not their subclasses); a tuple stays a tuple. Any other object (a Keras history, a class of the user's) is pickled
by the node (cloudpickle) and unpickled by the driver: the one place the driver unpickles anything
a node sent, and only from a frame the control channel authenticated (``channel.py``).

Only the standard library, msgpack and numpy: the node's child process encodes, the driver decodes.
"""

from __future__ import annotations

import pickle
from typing import Any

import msgpack

PLAIN, PICKLED = "msgpack", "pickle"
_TUPLE, _NDARRAY, _NPSCALAR = 1, 2, 3  # msgpack extension types


class NotPlain(Exception):
    """The value holds an object that msgpack does not carry: it is pickled instead."""


def encode(value: Any) -> tuple[bytes, str]:
    """``value`` as bytes, and how: ``(msgpack bytes, PLAIN)`` for a plain value, else
    ``(cloudpickle bytes, PICKLED)``."""
    try:
        return msgpack.packb(value, use_bin_type=True, strict_types=True, default=_default), PLAIN
    except (NotPlain, TypeError, ValueError, OverflowError):
        import cloudpickle

        return cloudpickle.dumps(value), PICKLED


def decode(data: bytes, encoding: str) -> Any:
    """The value ``encode`` made. A ``PICKLED`` one is unpickled: call it only on bytes from an
    authenticated frame."""
    if encoding == PLAIN:
        return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=_ext)
    if encoding == PICKLED:
        return pickle.loads(data)  # an authenticated frame of the run's own node: see the module's docstring
    raise ValueError(f"unknown value encoding {encoding!r}")


def _default(obj: Any) -> Any:
    """msgpack's hook for what it does not carry itself (``strict_types``: subclasses of what it
    does carry come here too, and are not plain: they would not come back as themselves)."""
    if type(obj) is tuple:
        return msgpack.ExtType(_TUPLE, _pack(list(obj)))
    import numpy as np

    if type(obj) is np.ndarray and obj.dtype.kind in "biufcS" and not obj.dtype.hasobject:
        array = np.ascontiguousarray(obj)
        return msgpack.ExtType(_NDARRAY, _pack([array.dtype.str, list(array.shape), array.tobytes()]))
    if isinstance(obj, np.generic) and obj.dtype.kind in "biufcS":
        return msgpack.ExtType(_NPSCALAR, _pack([obj.dtype.str, obj.tobytes()]))
    raise NotPlain(type(obj).__name__)


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True, strict_types=True, default=_default)


def _ext(code: int, data: bytes) -> Any:
    items = msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=_ext)
    if code == _TUPLE:
        return tuple(items)
    import numpy as np

    if code == _NDARRAY:
        dtype, shape, raw = items
        return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape).copy()
    if code == _NPSCALAR:
        dtype, raw = items
        return np.frombuffer(raw, dtype=np.dtype(dtype))[0]
    raise ValueError(f"unknown value extension {code}")
