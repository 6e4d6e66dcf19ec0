"""Small files that several processes on one machine share: written atomically, owned by a
process told apart from a later one reusing its pid."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import psutil


def write_json_atomic(path: str, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` so that a reader sees the old file or the new one, whole."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def same_process(pid: int, create_time: float) -> bool:
    """Whether process ``pid`` runs and is the one that started at ``create_time`` (not a reuse)."""
    try:
        return abs(psutil.Process(pid).create_time() - create_time) < 1e-3
    except psutil.Error:
        return False
