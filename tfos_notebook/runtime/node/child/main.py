"""The process that runs the user's function on a node.

Started by the node as soon as its Spark task begins (``python -m tfos_notebook.runtime.node.child.main
STATUS_FD NODE_PID RUN_ID TASK PORT_FD ORDERS_FD NAME ATTEMPT``, the last two for the leftover scan
only), forked from the task's Python worker where that is safe (``forked.py``, which calls
:func:`main` with the same arguments) or else a fresh interpreter, in a process group of its own
with ``CUDA_VISIBLE_DEVICES`` already in its environment, so that its start overlaps the
reservation (and, when the function uses TensorFlow, its import too: ``TFOS_PREIMPORT``,
``driver/run/preimport.py``). A fed node (input mode ``spark``) first writes a line saying where to
serve the data feed, which the child does at once, while the cluster still forms. When the cluster
spec is known the node writes one JSON line to its stdin: the payload and result paths and the rest
of the environment (``TF_CONFIG``); an empty stdin means "not needed", and it exits. With ``release_port=False``,
PORT_FD is a Unix socket on which the node hands over the socket holding the node's reserved port
(``ctx.tmp_socket``; "-" otherwise). A fresh process per run means TensorFlow's collective state
never leaks into the next run (a fork comes from a worker that never imported it), and killing
the group releases every GPU and port it held.

It writes the outcome to RESULT (a pickled ``("ok", value_bytes, type_name, encoding)``, the value
encoded by ``wire/values.py``, or ``("error", traceback)``),
progress lines to STATUS_FD (``ctx.report``, its step timing, ``pace.py``), takes profile orders from
ORDERS_FD (``profiler.py``), and kills itself and its group if the node that started it dies.
"""

from __future__ import annotations

import faulthandler
import glob
import importlib
import json
import logging
import os
import pickle
import shutil
import socket
import sys
import threading
import traceback
from functools import partial

from ...host.paths import node_dir_name, spill_prefix, work_prefix
from ...host.watchdog import STACKS_SIGNAL, watch_parent
from ...wire.plan import FEED_SERVER_MODULE, PREIMPORT_ENV
from . import mlflowrelay
from .statuspipe import open_pipe


def _encoded(value: object) -> tuple[bytes, str]:
    """The value's bytes and their encoding (msgpack where it can carry the value, see ``wire/values.py``)."""
    from ...wire import values

    return values.encode(value)


def _write_result(path: str, outcome: tuple) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(outcome, f)
    os.replace(tmp, path)


def _type_name(value) -> str:
    cls = type(value)
    return f"{cls.__module__}.{cls.__qualname__}" if cls.__module__ != "builtins" else cls.__qualname__


def _next_order() -> dict | None:
    """The node's next order on stdin (None: its stdin closed, nothing more will come)."""
    line = sys.stdin.readline()
    return json.loads(line) if line.strip() else None


class _Preimport:
    """Imports the modules named in ``PREIMPORT_ENV`` (TensorFlow; first, on a fed node, its feed server)
    on a thread, in order, while the cluster forms; a failure is left to the function's own import
    to report. Meanwhile the main thread imports nothing the thread may be importing: two threads
    importing numpy at once can leave it half initialized ("partially initialized module
    'numpy._core.multiarray'"). So the main thread waits for ``FEED_SERVER_MODULE`` (pyarrow, numpy)
    before it serves the feed, and for all of it before it unpickles the function, which may
    import anything."""

    def __init__(self) -> None:
        names = list(filter(None, os.environ.get(PREIMPORT_ENV, "").split(",")))
        self._done = {name: threading.Event() for name in names}
        self._thread = threading.Thread(target=self._imports, args=(names,), daemon=True, name="tfos-preimport")
        if names:
            self._thread.start()

    def _imports(self, names: list[str]) -> None:
        try:
            for name in names:
                importlib.import_module(name)
                self._done[name].set()
        except Exception:
            pass
        finally:
            for event in self._done.values():
                event.set()

    def wait_for(self, name: str) -> None:
        """Return once ``name`` is imported, or will not be by this thread."""
        if name in self._done:
            self._done[name].wait()

    def join(self) -> None:
        """Return once the thread's imports are done."""
        if self._done:
            self._thread.join()


def _serve_feed(spec: dict, status):
    from ...wire.channel import secret_from_json
    from .feed.server import FeedServer

    return FeedServer(secret_from_json(spec["secret"]), spec["host"], spec["buffer_bytes"]).start(status)


def _die_with_node(node_pid: int, run_id: str, task: str) -> None:
    """End this process's group when its node dies, first removing what a killed node leaves
    behind: its work folder (this process's working directory as it starts: payload, logs) and
    its partition's spill (a fed node's, beside it)."""
    orphaned = partial(_remove_node_folders, os.getcwd(), work_prefix(run_id, task),
                       spill_prefix(run_id, task, node_pid))
    threading.Thread(target=watch_parent, args=(node_pid,), kwargs={"orphaned": orphaned}, daemon=True).start()


def _remove_node_folders(workdir: str, prefix: str, spill: str) -> None:
    """Remove the node's folders once its node died without doing so (its Python worker was
    killed): only the work folder the node made for this run's task (named ``prefix``...) and,
    in the same temporary directory, the spills that node's process made (named ``spill``...)."""
    if not os.path.basename(workdir).startswith(prefix):
        return
    parent = os.path.dirname(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    for path in glob.glob(os.path.join(glob.escape(parent), glob.escape(spill) + "*")):
        shutil.rmtree(path, ignore_errors=True)


def receive_port(fd: int) -> socket.socket:
    """The socket holding the node's reserved port, handed over by the node on the Unix socket ``fd``."""
    with socket.socket(fileno=fd) as handoff:
        _, fds, _, _ = socket.recv_fds(handoff, 1, 1)
    if not fds:
        raise ConnectionError("the node closed the port hand-over without sending the reserved port")
    return socket.socket(fileno=fds[0])


def main(argv: list[str]) -> int:
    status_fd = int(argv[1])
    port_fd = int(argv[5]) if argv[5] != "-" else None
    orders_fd = int(argv[6])
    faulthandler.enable()  # a crash in native code (TensorFlow) leaves its Python stacks in the node's log
    faulthandler.register(STACKS_SIGNAL, all_threads=True)  # so does a run that failed elsewhere (dump_stacks)
    _die_with_node(int(argv[2]), argv[3], argv[4])
    status = open_pipe(status_fd)
    from ...wire import values  # noqa: F401  (msgpack: imported while the cluster is still reserving)
    from . import ctx as _ctx  # noqa: F401  (the payload's NodeContext)
    from . import taskcontext
    from .orders import follow_orders
    from .pace import Pace
    from .savepoint import Preempted, SavePoint

    preimport = _Preimport()  # TensorFlow, imported while the node registers and the cluster forms
    order = _next_order()
    feed = unserved = None
    if order is not None and "feed" in order:  # InputMode.SPARK: serve the data feed while the cluster forms
        preimport.wait_for(FEED_SERVER_MODULE)  # imported by the thread first
        try:
            feed = _serve_feed(order["feed"], status)
        except Exception as e:  # the function's outcome, once there is one to report
            unserved = e
        order = _next_order()
    if order is None:
        return 0
    payload_path, result_path = order["payload"], order["result"]
    os.environ.update(order["env"])
    if os.environ.get("MLFLOW_TRACKING_URI", "").startswith(f"{mlflowrelay.SCHEME}:"):  # the run is logged to MLflow
        mlflowrelay.limit_autolog()
    pace = ctx = None
    try:
        if unserved is not None:
            raise unserved
        preimport.join()  # the function starts, and is unpickled, with no import under way on another thread
        with open(payload_path, "rb") as f:
            payload = pickle.load(f)
        taskcontext.install_on_import(payload["task_context"])  # BarrierTaskContext.get() answers for the task
        ctx = payload["ctx"]
        pace, savepoint = Pace(status.send), SavePoint(status.send)
        ctx.connect(status, pace, savepoint)
        if port_fd is not None:
            ctx.tmp_socket = receive_port(port_fd)
        follow_orders(os.fdopen(orders_fd, "r"), pace, node_dir_name(ctx.job_name, ctx.task_index), status.send,
                      savepoint)
        ctx.mgr = feed
        if feed is not None:  # how long the function waits for its data (the input-bound finding)
            feed.pace = pace
        value = payload["main_fun"](payload["args"], ctx)
        _write_result(result_path, ("ok", *_encoded(value), _type_name(value)))
        return 0
    except BaseException as e:  # report everything, SystemExit and KeyboardInterrupt included
        if isinstance(e, Preempted):  # saved the decommission checkpoint: the attempt ends (savepoint.py)
            _write_result(result_path, ("stopped", str(e)))
            _leave_saved(ctx, pace)
        if isinstance(e, SystemExit) and e.code in (None, 0):
            _write_result(result_path, ("ok", *_encoded(None), "NoneType"))
            return 0
        _write_result(result_path, ("error", traceback.format_exc()))
        return 1
    finally:
        if pace is not None:
            pace.close()  # the last window, while the status pipe is open
        sys.stdout.flush()
        sys.stderr.flush()


def _leave_saved(ctx, pace) -> None:
    """End the process of a node that saved its decommission checkpoint, at once, its own files
    flushed. Not by returning: under a multi-worker strategy, dropping the training's frames (which
    the exception's traceback holds) and TensorFlow's teardown wait for peers that are already gone,
    up to 10 s."""
    pace.close()
    ctx.flush()  # ctx.summary_writer's writers (Keras's were flushed at the save)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
