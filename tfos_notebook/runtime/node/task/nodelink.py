"""The node's link to the driver: the driver's orders, read on a thread of their own so that
pings are answered at once; the report of leftover processes on the node's host; the ``Result``
that ends the node's account (see ``node.py``)."""

from __future__ import annotations

import logging
import pickle
import queue
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict

from ...wire import channel
from ...wire import messages as m
from ...wire.errors import ChannelError

log = logging.getLogger(__name__)

MAX_RESULT_BYTES = 32 << 20


# Tracebacks of a process that ran out of memory by itself (Python's, C++'s, an address-space limit's)
OUT_OF_MEMORY = re.compile(r"^(MemoryError\b|.*std::bad_alloc|.*Cannot allocate memory)", re.MULTILINE)


def result_message(outcome: tuple | None, exit_code: int, stopped: bool, memory: str = "") -> m.Result:
    """The ``Result`` for the child's outcome (``("ok", value_bytes, encoding, type_name)``, ``("error", tb)``
    or ``("stopped", why)``: it saved the decommission checkpoint); ``memory``: why the node's memory
    guard, or the kernel, ended the process, if either did."""
    if stopped or (outcome and outcome[0] == "stopped"):
        return m.Result(ok=False, stopped=True, exit_code=exit_code)
    if outcome and outcome[0] == "ok":
        value = outcome[1]
        if len(value) > MAX_RESULT_BYTES:
            return m.Result(ok=False, exit_code=exit_code,
                            traceback=f"the function returned {len(value)} bytes; at most {MAX_RESULT_BYTES} "
                                      "can travel back to the driver: write large results to storage instead")
        return m.Result(ok=True, value=value, encoding=outcome[2], value_type=outcome[3], exit_code=exit_code)
    tb = outcome[1] if outcome else ""
    if memory:
        return m.Result(ok=False, traceback=f"MemoryError: the node's process was stopped: {memory}\n{tb}".rstrip(),
                        exit_code=exit_code, cause="memory")
    if not tb and exit_code < 0:
        tb = f"the process was killed by signal {signal.Signals(-exit_code).name}"
    return m.Result(ok=False, traceback=tb, exit_code=exit_code, cause="memory" if OUT_OF_MEMORY.search(tb) else "")


class Orders:
    """The driver's messages to this node, read on a thread of their own so that pings are answered
    at once whatever the node is doing. ``next()`` returns the next message other than a ping, or
    None once the connection is gone; ``heard`` is when the driver last said anything."""

    def __init__(self, conn: channel.Connection) -> None:
        self.conn = conn
        self.heard = time.monotonic()
        self._queue: queue.SimpleQueue[m.Message | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._read, daemon=True, name="tfos-orders")]
        self._threads[0].start()

    def next(self) -> m.Message | None:
        return self._queue.get()

    def follow(self, target: Callable[[], None], name: str) -> None:
        """Run ``target`` (which takes orders with ``next()`` until it returns or gets None) on a
        thread of its own, joined by :meth:`join`."""
        thread = threading.Thread(target=target, daemon=True, name=name)
        self._threads.append(thread)
        thread.start()

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the reading thread and those following the orders: they end once the
        connection is closed."""
        for thread in self._threads:
            thread.join(timeout)

    def _read(self) -> None:
        try:
            while True:
                try:
                    msg = m.decode(self.conn.recv())
                except channel.MalformedFrame as e:
                    log.warning("refused a message from the driver: %s", e)
                    continue
                finally:
                    self.heard = time.monotonic()
                if isinstance(msg, m.Ping):
                    self.conn.send(m.encode(m.Pong(msg.seq)))
                else:
                    self._queue.put(msg)
        except (OSError, ConnectionError, ChannelError) as e:
            log.debug("the connection to the driver ended: %s", e)
        finally:
            self._queue.put(None)


def report_leftovers(run_id: str, conn: channel.Connection, address: str, started: threading.Event,
                     ended: threading.Event, stall_secs: float = 2.0, settle_secs: float = 1.0) -> None:
    """Tell the driver about processes of earlier runs (and foreign GPU holders) on this host.

    The scan costs tens to hundreds of milliseconds of CPU, which the launch must not share: it
    waits until the child was told to go and then ``settle_secs`` more, while the child starts its
    function (or until the child ended, if sooner); or until the reservation has stalled for
    ``stall_secs``, when its findings matter most."""
    from ...host.orphans import scan_host

    if started.wait(stall_secs):
        ended.wait(settle_secs)
    try:
        found = tuple(asdict(x) for x in scan_host(exclude_runs={run_id}, address=address))
    except Exception:  # diagnostics must never break the node
        log.warning("the scan for leftover processes failed", exc_info=True)
        return
    if found and not conn.closed:
        try:
            conn.send(m.encode(m.Leftovers(found)))
        except OSError as e:  # the node ended (and closed its connection) while the scan ran
            log.debug("leftovers not reported: %s", e)


def read_result(path: str) -> tuple | None:
    """The outcome the child wrote to ``path``, or None when it wrote none (it was killed, or died
    before its function returned: ``result_message`` says so from its exit code)."""
    try:
        with open(path, "rb") as f:
            return pickle.load(f)  # written by our own child process on this machine, never from the network
    except (OSError, EOFError, pickle.UnpicklingError) as e:
        log.debug("no result from the child process in %s: %s", path, e)
        return None
