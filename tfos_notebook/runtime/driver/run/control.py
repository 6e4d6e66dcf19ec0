"""What a run holds on the driver for its nodes to reach: the run's secret, its control server
(which hands the nodes' messages to whoever the run names) and its model directory's probe file.
``Run`` makes them in its pre-flight (:meth:`ControlPlane.open`) and lets them go when it ends."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ...wire import channel, tls
from ..spark import SparkBackend
from . import storage

QUERY_GRACE_SECS = 300.0  # a failed run's control server answers its inference tasks this long (see release)


class ControlPlane:
    """The driver's end of the run ``run_id``'s control channel; ``secret`` is the run's (empty
    until :meth:`open`), ``default_fs`` the cluster's default filesystem, ``probe`` the probe file
    written under ``model_dir`` (None when there is none)."""

    def __init__(self, run_id: str, backend: SparkBackend, model_dir: str | None) -> None:
        self.run_id, self.backend, self.model_dir = run_id, backend, model_dir
        self.secret = channel.RunSecret(b"")
        self.default_fs = ""
        self.probe: str | None = None
        self.server: channel.ControlServer | None = None
        self._closer: threading.Timer | None = None

    def open(self, encrypted: bool, on_message: Callable[[channel.Connection, dict], None],
             on_close: Callable[[channel.Connection], None]) -> None:
        """Make what the nodes will reach: the secret (with a TLS identity when ``encrypted``), the
        control server, the probe file. Raises what ``backend.check_reachable`` raises."""
        self.backend.check_reachable()
        self.default_fs = self.backend.default_fs()
        self.secret = channel.RunSecret(channel.new_secret(), tls.new_identity() if encrypted else None)
        self.server = channel.ControlServer(self.backend.driver_host(), self.secret, on_message, on_close)
        self.probe = storage.write_probe(self.model_dir, self.run_id)

    def release(self, answer_queries: bool) -> None:
        """Remove the probe file and close the server, or (``answer_queries``: inference data sets
        of a failed run are still out, which Spark may evaluate, and their tasks ask why a node's
        feed is gone) keep it up until the next call or ``QUERY_GRACE_SECS``."""
        storage.remove_probe(self.probe)
        if self.server is None:
            return
        if answer_queries:
            if self._closer is None:
                self._closer = threading.Timer(QUERY_GRACE_SECS, self.server.close)
                self._closer.daemon = True
                self._closer.start()
            return
        if self._closer is not None:
            self._closer.cancel()
        self.server.close()

    @property
    def encrypted(self) -> bool:
        return self.secret.tls is not None

    @property
    def address(self) -> tuple[str, int] | None:
        return self.server.address if self.server is not None else None
