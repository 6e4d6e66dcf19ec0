"""Reloads a notebook's TensorBoard frame when TensorBoard's runs or dashboards change, where the
frame's own script cannot reach into TensorBoard's page: on Databricks, whose widgets are drawn on
a domain of their own, the page behind the driver proxy is of another origin. TensorBoard's page
lists its dashboards and unfolds its tag groups once, at load; a new run (a node's first events)
or a new dashboard (the Profile tab once a trace lands) then needs a fresh load. The kernel asks
TensorBoard itself, on the driver, every few seconds; reloads come a few times a run."""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from collections.abc import Callable

log = logging.getLogger(__name__)

WATCH_SECS = 2.0


def cross_origin_frame(databricks) -> bool:
    """Whether the notebook's widgets are drawn on another origin than TensorBoard's page (a
    Databricks cluster's driver proxy: ``databricks`` is its ``DatabricksContext``, or None)."""
    return databricks is not None and databricks.has_driver_proxy


def page_state(port: int) -> tuple | None:
    """What TensorBoard's page shows at load: its runs and active dashboards (None: no answer)."""
    try:
        base = f"http://127.0.0.1:{port}/data/"
        with urllib.request.urlopen(base + "runs", timeout=5) as r:
            runs = json.loads(r.read())
        with urllib.request.urlopen(base + "plugins_listing", timeout=5) as r:
            plugins = json.loads(r.read())
    except (OSError, ValueError) as e:
        log.debug("TensorBoard on port %s did not answer: %s", port, e)
        return None
    return tuple(sorted(runs)), tuple(sorted(name for name, p in plugins.items() if p.get("enabled")))


class PageWatch:
    """Calls ``reload`` when ``state()`` (default: :func:`page_state` of ``port``) changes from
    what it was, checking every ``interval`` seconds on a daemon thread until ``done()`` is true."""

    def __init__(self, port: int, reload: Callable[[], None], done: Callable[[], bool],
                 interval: float = WATCH_SECS, state: Callable[[], tuple | None] | None = None) -> None:
        self._state = state or (lambda: page_state(port))
        self._reload, self._done, self.interval = reload, done, interval
        self._stop = threading.Event()
        self.reloads = 0
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"tfos-tb-page-{port}")
        self._thread.start()

    def _loop(self) -> None:
        seen = self._state()
        while not self._stop.wait(self.interval) and not self._done():
            now = self._state()
            if now is not None and now != seen:
                seen = now
                self.reloads += 1
                try:
                    self._reload()
                except Exception:  # a broken view must not end the watch
                    log.warning("the TensorBoard frame could not be reloaded", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.interval + 6)
