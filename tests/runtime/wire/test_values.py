"""A node's return value on the wire (``runtime/wire/values.py``): plain values without pickle,
anything else pickled (and unpickled by the driver only from an authenticated frame)."""

from __future__ import annotations

import pickle
from collections import OrderedDict

import numpy as np
import pytest

from tfos_notebook.runtime.wire import values


@pytest.mark.parametrize("value", [
    None, True, 0, -(2 ** 63), 2 ** 64 - 1, 1.5, float("inf"), "text", b"\x00\xff",
    [1, "a", None], (1, (2, 3)), {"accuracy": 0.97, "loss": [0.5, 0.25], "steps": (1, 2)}, {1: "int key"},
    [], (), {},
], ids=repr)
def test_plain_values_travel_as_msgpack_and_come_back_equal_without_any_unpickling(value, monkeypatch):
    data, encoding = values.encode(value)
    assert encoding == values.PLAIN

    def refuse(*_):
        raise AssertionError("unpickled")

    monkeypatch.setattr(pickle, "loads", refuse)
    back = values.decode(data, encoding)
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize("array", [
    np.arange(12, dtype=np.float32).reshape(3, 4), np.array([True, False]), np.zeros((0, 5), np.int64),
    np.array([1 + 2j], np.complex64), np.array([b"ab", b"c"]), np.arange(6, dtype=">i4")[::2],
], ids=lambda a: f"{a.dtype}{a.shape}")
def test_numpy_arrays_and_scalars_keep_their_dtype_shape_and_values(array, monkeypatch):
    monkeypatch.setattr(pickle, "loads", lambda *_: pytest.fail("unpickled"))
    data, encoding = values.encode({"predictions": array, "first": array.flat[0] if array.size else np.float64(0)})
    back = values.decode(data, encoding)
    assert encoding == values.PLAIN
    assert back["predictions"].dtype == array.dtype and back["predictions"].shape == array.shape
    assert np.array_equal(back["predictions"], array) and back["predictions"].flags.writeable
    assert back["first"] == (array.flat[0] if array.size else 0) and isinstance(back["first"], np.generic)


class Model:
    def __init__(self, weights):
        self.weights = weights

    def __eq__(self, other):
        return isinstance(other, Model) and other.weights == self.weights


@pytest.mark.parametrize("value", [Model([1, 2]), OrderedDict(a=1), [Model(1)], 2 ** 70, np.array([object()]),
                                   {"history": Model(3)}], ids=lambda v: type(v).__name__)
def test_other_objects_are_pickled_whole(value):
    data, encoding = values.encode(value)
    assert encoding == values.PICKLED
    back = values.decode(data, encoding)
    assert type(back) is type(value)
    if not isinstance(value, np.ndarray):
        assert back == value


def test_an_unknown_encoding_is_refused():
    with pytest.raises(ValueError, match="unknown value encoding 'yaml'"):
        values.decode(b"", "yaml")
