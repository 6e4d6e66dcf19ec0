"""The JupyterLab extension and the monitor in a real browser: runs the Playwright tests in
labextension/ui-tests (headless Debian chromium, a Jupyter server of this checkout serving
JupyterLab and Notebook 7, notebooks that train on 2 local Spark workers). See
docs/labextension.md."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LABEXT = REPO / "labextension"
UI_TESTS = LABEXT / "ui-tests"
BUILT = REPO / "tfos_notebook" / "labextension" / "package.json"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(shutil.which("npx") is None or shutil.which("node") is None,
                       reason="Node.js (node, npx) is not installed: the browser test of the JupyterLab "
                              "extension needs Node 20+"),
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                       reason=f"no chromium at {CHROMIUM}: install Debian's (`apt-get install chromium`, "
                              "or `make ui-deps` as root) or set CHROMIUM to a Chromium binary"),
]


def _npm(args: list[str], cwd: Path, timeout: float) -> None:
    done = subprocess.run(["npm", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"npm {' '.join(args)} failed in {cwd}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ui_tests_ready() -> Path:
    """The extension built from this checkout and the ui-tests' npm packages installed (both are
    what ``make labext ui-deps`` does; done here when missing so that pytest alone works)."""
    if not BUILT.exists():
        _npm(["ci", "--no-audit", "--no-fund"], REPO, 600)
        _npm(["run", "build"], LABEXT, 600)
    if not (UI_TESTS / "node_modules" / "@jupyterlab" / "galata").exists():
        _npm(["ci", "--no-audit", "--no-fund"], UI_TESTS, 600)
    return UI_TESTS


def test_a_notebook_run_appears_in_the_runs_sidebar_and_its_tensorboard_panel_draws_scalars(
        ui_tests_ready, tmp_path):
    """The four browser tests pass: the training run end to end in JupyterLab (the monitor's
    quiet log, curves, progress bar and throughput, the sidebar's details, pace and actions, a
    TensorBoard panel that shows a new point within 5 s, a re-run whose monitor's own TensorBoard
    shows a new point within 5 s and whose Profile button records both nodes' traces, shown by
    the Profile tab through jupyter-server-proxy, restore after reload, clearing ended runs),
    the sidebar's message when the server extension is missing, the monitor in Notebook 7
    with the curve kept by the saved notebook, and a sweep in the sidebar (its trials below it,
    a long sweep stopped from there). The screenshots land in a temporary folder; copy
    them to docs/ to refresh the documentation's."""
    screenshots = tmp_path / "screenshots"
    screenshots.mkdir()
    (tmp_path / "root").mkdir()
    env = {
        **os.environ,
        # The JupyterLab, its kernels and their Spark nodes run this checkout with this interpreter.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        # TensorFlow's notices printed as on a user's nodes (make test quiets them): the monitor must
        # hide them while run.logs() keeps them.
        "TF_CPP_MIN_LOG_LEVEL": "0",
        "TFOS_UI_PORT": str(_free_port()),
        "TFOS_UI_SCREENSHOT_DIR": str(screenshots),
        "TFOS_NOTEBOOK_STATE_DIR": str(tmp_path / "state"),
        "JUPYTERLAB_GALATA_ROOT_DIR": str(tmp_path / "root"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "CHROMIUM": CHROMIUM,
        "CI": "1",
    }
    done = subprocess.run(["npx", "playwright", "test"], cwd=ui_tests_ready, env=env, capture_output=True,
                          text=True, timeout=840)
    output = done.stdout + done.stderr
    # Playwright's own report first: the Jupyter server's log (its [WebServer] lines) can drown it.
    report = "\n".join(line for line in output.splitlines() if "[WebServer]" not in line)
    assert done.returncode == 0, f"the Galata test failed:\n{report[-12000:]}"
    assert re.search(r"\b4 passed\b", output) and " skipped" not in output, output[-3000:]
    for name in ("labextension.png", "monitor.png", "sidebar.png", "profile.png"):
        assert (screenshots / name).stat().st_size > 2_000, name
    for line in ("panel latency over .*", "monitor latency over .*", "profile .* of the re-run: hosts .*"):
        print(re.search(line, output).group(0))
