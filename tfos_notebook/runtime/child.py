"""The process that runs the user's function on a node.

Started by the node (``python -m tfos_notebook.runtime.child PAYLOAD RESULT STATUS_FD``) in a
process group of its own, with ``TF_CONFIG`` and ``CUDA_VISIBLE_DEVICES`` in its environment. A
fresh process per run means TensorFlow's collective state never leaks into the next run, and
killing the group releases every GPU and port it held.

It writes the outcome to RESULT (a pickled ``("ok", value_bytes)`` or ``("error", traceback)``),
progress lines to STATUS_FD, and kills itself and its group if the node that started it dies.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import time
import traceback


def _watch_parent(parent: int, interval: float = 0.5) -> None:
    while True:
        time.sleep(interval)
        if os.getppid() != parent:
            os.killpg(0, signal.SIGKILL)


def _write_result(path: str, outcome: tuple) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(outcome, f)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    payload_path, result_path, status_fd = argv[1], argv[2], int(argv[3])
    threading.Thread(target=_watch_parent, args=(int(argv[4]),), daemon=True).start()
    status = os.fdopen(status_fd, "w", buffering=1)
    try:
        from pyspark import cloudpickle

        with open(payload_path, "rb") as f:
            payload = pickle.load(f)
        ctx = payload["ctx"]
        ctx._status = status
        ctx.mgr = payload.get("feed")
        if ctx.mgr is not None:  # InputMode.SPARK: serve the data feed before the function starts
            ctx.mgr.start(status)
        value = payload["main_fun"](payload["args"], ctx)
        _write_result(result_path, ("ok", cloudpickle.dumps(value)))
        return 0
    except BaseException as e:  # report everything, SystemExit and KeyboardInterrupt included
        if isinstance(e, SystemExit) and e.code in (None, 0):
            _write_result(result_path, ("ok", pickle.dumps(None)))
            return 0
        _write_result(result_path, ("error", traceback.format_exc()))
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
