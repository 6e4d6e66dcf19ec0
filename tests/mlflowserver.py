"""A real MLflow tracking server for the tests: ``mlflow server`` as a process of its own on
127.0.0.1 with a sqlite backend, its artifacts proxied, and MLflow's basic-auth app in front, so a
client without the credentials (a node) is refused (401) and one with them (the driver) logs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

USERNAME = "admin"
PASSWORD = "tfos-test-password"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    """``start()`` returns once ``/health`` answers; ``stop()`` ends the server's process group."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120.0) -> MlflowServer:
        os.makedirs(self.root, exist_ok=True)
        config = os.path.join(self.root, "auth.ini")
        with open(config, "w") as f:
            f.write("[mlflow]\ndefault_permission = READ\n"
                    f"database_uri = sqlite:///{self.root}/auth.db\nadmin_username = {USERNAME}\n"
                    f"admin_password = {PASSWORD}\n"
                    "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n")
        # No job runner: its huey consumers (seven processes) poll for jobs these tests never make, a
        # steady third of a core taken from the other tests while the server lives.
        env = {**os.environ, "MLFLOW_AUTH_CONFIG_PATH": config, "MLFLOW_FLASK_SERVER_SECRET_KEY": "tfos-tests",
               "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        for name in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
            env.pop(name, None)
        mlflow = os.path.join(os.path.dirname(sys.executable), "mlflow")
        self.proc = subprocess.Popen(
            [mlflow, "server", "--app-name", "basic-auth", "--backend-store-uri", f"sqlite:///{self.root}/mlflow.db",
             "--artifacts-destination", os.path.join(self.root, "artifacts"), "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", "1"],
            env=env, stdout=open(os.path.join(self.root, "server.log"), "wb"), stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {self.proc.returncode}: see {self.root}/server.log")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.25)
        self.stop()
        raise TimeoutError(f"mlflow server did not answer within {timeout:.0f}s: see {self.root}/server.log")

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(10)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None
