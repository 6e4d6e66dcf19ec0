"""Helpers for the TensorBoard tests: TensorFlow-free event files and TensorBoard HTTP polling.

Event files are written here in TensorFlow's own format (TFRecord framing with masked CRC32C
around ``Event`` protos with ``simple_value`` scalars), so the test process never imports
TensorFlow; the nodes in the run tests write theirs with TensorFlow itself.
"""

from __future__ import annotations

import json
import struct
import time
import urllib.parse
import urllib.request


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def _masked_crc(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    return bytes([tag]) + _varint(len(payload)) + payload


def record(event: bytes) -> bytes:
    """One TFRecord around a serialized Event."""
    header = struct.pack("<Q", len(event))
    return header + struct.pack("<I", _masked_crc(header)) + event + struct.pack("<I", _masked_crc(event))


def version_record(wall_time: float) -> bytes:
    return record(b"\x09" + struct.pack("<d", wall_time) + _field(0x1A, b"brain.Event:2"))


def scalar_record(tag: str, value: float, step: int, wall_time: float | None = None) -> bytes:
    wall = time.time() if wall_time is None else wall_time
    summary_value = _field(0x0A, tag.encode()) + b"\x15" + struct.pack("<f", value)
    event = b"\x09" + struct.pack("<d", wall) + b"\x10" + _varint(step) + _field(0x2A, _field(0x0A, summary_value))
    return record(event)


def get_json(url: str, timeout: float = 5.0, headers: dict | None = None):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def scalars(port: int, run: str, tag: str) -> list[list[float]]:
    """``[[wall_time, step, value], ...]`` served by the TensorBoard on ``port`` ([] while absent)."""
    query = urllib.parse.urlencode({"run": run, "tag": tag})
    try:
        return get_json(f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?{query}")
    except OSError:
        return []


def wait_for_scalars(port: int, run: str, tag: str, count: int, timeout: float = 60.0) -> list[list[float]]:
    deadline = time.monotonic() + timeout
    points: list = []
    while time.monotonic() < deadline:
        points = scalars(port, run, tag)
        if len(points) >= count:
            return points
        time.sleep(0.2)
    runs = get_json(f"http://127.0.0.1:{port}/data/runs")
    raise AssertionError(f"{run}/{tag}: {len(points)} of {count} points after {timeout}s; runs served: {runs}")
