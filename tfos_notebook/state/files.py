"""Small files that several processes on one machine share, in this user's state directory:
written atomically, owned by a process told apart from a later one reusing its pid."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from typing import Any

import psutil

STATE_DIR_ENV = "TFOS_NOTEBOOK_STATE_DIR"


def state_dir(*parts: str) -> str:
    """This user's tfos_notebook state directory (``$TFOS_NOTEBOOK_STATE_DIR`` overrides it), or
    its subdirectory ``parts``; created readable by this user only."""
    root = os.environ.get(STATE_DIR_ENV) or os.path.join(tempfile.gettempdir(), f"tfos_notebook-{os.getuid()}")
    os.makedirs(root, mode=0o700, exist_ok=True)
    if not parts:
        return root
    path = os.path.join(root, *parts)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


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
