"""The process that runs the user's function on a node.

Started by the node as soon as its Spark task begins (``python -m tfos_notebook.runtime.node.child
STATUS_FD NODE_PID RUN_ID TASK ORDERS_FD``), in a process group of its own with ``CUDA_VISIBLE_DEVICES`` already in its
environment, so that interpreter start-up and imports overlap the reservation. When the cluster
spec is known the node writes one JSON line to its stdin: the payload and result paths and the
rest of the environment (``TF_CONFIG``); an empty stdin means "not needed", and it exits. A fresh
process per run means TensorFlow's collective state never leaks into the next run, and killing
the group releases every GPU and port it held.

It writes the outcome to RESULT (a pickled ``("ok", value_bytes, type_name)`` or ``("error", traceback)``),
progress lines to STATUS_FD (``ctx.report``, its step timing, ``pace.py``), takes profile orders from
ORDERS_FD (``profiler.py``), and kills itself and its group if the node that started it dies.
"""

from __future__ import annotations

import faulthandler
import json
import os
import pickle
import sys
import threading
import traceback

from ..wire.messages import Message, to_json
from ..wire.paths import node_dir_name
from ..wire.watchdog import watch_parent


def _write_result(path: str, outcome: tuple) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(outcome, f)
    os.replace(tmp, path)


def _type_name(value) -> str:
    cls = type(value)
    return f"{cls.__module__}.{cls.__qualname__}" if cls.__module__ != "builtins" else cls.__qualname__


def _status_writer(fd: int):
    """Writes one message as one line, in one ``write`` (whole lines, whichever thread writes)."""

    def emit(msg: Message) -> None:
        os.write(fd, (to_json(msg) + "\n").encode())

    return emit


def main(argv: list[str]) -> int:
    status_fd, node_pid, orders_fd = int(argv[1]), int(argv[2]), int(argv[5])
    faulthandler.enable()  # a crash in native code (TensorFlow) leaves its Python stacks in the node's log
    threading.Thread(target=watch_parent, args=(node_pid,), daemon=True).start()
    status = os.fdopen(status_fd, "w", buffering=1)
    import cloudpickle  # imported while the cluster is still reserving

    from . import ctx as _ctx  # noqa: F401  (the payload's NodeContext)
    from .pace import Pace
    from .profiler import follow_orders

    line = sys.stdin.readline()
    if not line.strip():
        return 0
    go = json.loads(line)
    payload_path, result_path = go["payload"], go["result"]
    os.environ.update(go["env"])
    ctx = None
    try:
        with open(payload_path, "rb") as f:
            payload = pickle.load(f)
        ctx = payload["ctx"]
        ctx._status = status
        emit = _status_writer(status_fd)
        ctx._pace = Pace(emit)
        follow_orders(os.fdopen(orders_fd, "r"), ctx._pace, node_dir_name(ctx.job_name, ctx.task_index), emit)
        ctx.mgr = payload.get("feed")
        if ctx.mgr is not None:  # InputMode.SPARK: serve the data feed before the function starts
            ctx.mgr.pace = ctx._pace
            ctx.mgr.start(status)
        value = payload["main_fun"](payload["args"], ctx)
        _write_result(result_path, ("ok", cloudpickle.dumps(value), _type_name(value)))
        return 0
    except BaseException as e:  # report everything, SystemExit and KeyboardInterrupt included
        if isinstance(e, SystemExit) and e.code in (None, 0):
            _write_result(result_path, ("ok", pickle.dumps(None), "NoneType"))
            return 0
        _write_result(result_path, ("error", traceback.format_exc()))
        return 1
    finally:
        if ctx is not None and ctx._pace is not None:
            ctx._pace.close()  # the last window, while the status pipe is open
        sys.stdout.flush()
        sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
