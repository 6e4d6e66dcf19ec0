"""What a Spark standalone master tells about the other applications on its cluster.

An application's own scheduler sees only the executors it was given: when another application
holds every core, it sees none and cannot say why. The standalone master's web UI answers
``http://<master host>:<web UI port>/json/`` with its workers and active applications (cores
each holds); the UI port is ``spark.master.ui.port`` (Spark's default 8080). Plain HTTP, no JVM.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import Callable
from urllib.parse import urlparse

log = logging.getLogger(__name__)

#: Seconds a master's UI gets to answer (it is asked only while a launch waits for slots).
MASTER_TIMEOUT = 1.0
DEFAULT_UI_PORT = 8080


def master_hosts(master: str) -> list[str]:
    """The hosts of a standalone master URL (``spark://h1:7077,h2:7077``: both); [] for others."""
    if not master.startswith("spark://"):
        return []
    return [urlparse(f"spark://{hostport}").hostname or "" for hostport in master[len("spark://"):].split(",")]


def master_state(master: str, ui_port: int, timeout: float = MASTER_TIMEOUT) -> dict | None:
    """The JSON state of the first master of ``master`` whose web UI answers on ``ui_port``, or None."""
    for host in master_hosts(master):
        try:
            with urllib.request.urlopen(f"http://{host}:{ui_port}/json/", timeout=timeout) as r:
                state = json.load(r)
        except (OSError, ValueError) as e:  # UI off, another port, a standby master...
            log.debug("standalone master %s:%s did not answer: %s", host, ui_port, e)
            continue
        if state.get("status", "ALIVE") == "ALIVE":
            return state
    return None


def master_state_of(master: str, conf: Callable[[str], str | None]) -> dict | None:
    """The JSON state of ``master`` as an application with the Spark settings ``conf`` reaches it:
    its UI at ``spark.master.ui.port``. None for other masters, or when it does not answer."""
    return master_state(master, int(conf("spark.master.ui.port") or DEFAULT_UI_PORT))


def granted_cores(state: dict, own_app_id: str) -> int | None:
    """The cores the master in ``state`` (its JSON) granted ``own_app_id``: it grants them as it
    starts the application's executors, before they register with the driver. None if the master
    does not list the application."""
    for app in state.get("activeapps", []):
        if app.get("id") == own_app_id:
            return int(app.get("cores") or 0)
    return None


def other_applications(state: dict, own_app_id: str) -> tuple[str, ...]:
    """The applications in ``state`` (a master's JSON) other than ``own_app_id`` that hold cores,
    one line each, and how many of the cluster's cores are in use."""
    lines = [f"application {app.get('name')!r} ({app.get('id')}, user {app.get('user')}) holds "
             f"{app.get('cores')} core(s)"
             for app in state.get("activeapps", [])
             if app.get("id") != own_app_id and int(app.get("cores") or 0) > 0]
    if lines:
        lines.append(f"the standalone master {state.get('url', '')}: {state.get('coresused', '?')} of "
                     f"{state.get('cores', '?')} cores in use by applications")
    return tuple(lines)
