"""JupyterLab (and Notebook 7) for the browser tests: Galata's test settings (no token: the REST API's
authentication is covered by tests/server), the tfos_notebook server extension, and the
JupyterLab extension as built in this checkout (``tfos_notebook/labextension``).

Environment: ``TFOS_UI_PORT`` (default 8888), ``JUPYTERLAB_GALATA_ROOT_DIR`` (the notebooks' folder).
"""

import os
from pathlib import Path

from jupyterlab.galata import configure_jupyter_server

REPO = Path(__file__).resolve().parents[2]
BUILT = REPO / "tfos_notebook" / "labextension"

configure_jupyter_server(c)  # noqa: F821  (c: the config object Jupyter passes)
# The same server serves Notebook 7 (/notebooks/...) when the notebook package is installed; its
# page exposes its app object as JupyterLab's does for Galata.
c.JupyterNotebookApp.expose_app_in_browser = True  # noqa: F821
c.ServerApp.port = int(os.environ.get("TFOS_UI_PORT", "8888"))  # noqa: F821
c.ServerApp.jpserver_extensions = {"tfos_notebook.server": True}  # noqa: F821
c.ServerApp.allow_root = True  # noqa: F821  (CI containers run as root)

# A labextensions folder naming the built extension, so the checkout's build is what loads even
# when the installed package carries another (or none).
extensions = Path(__file__).parent / ".jupyter-test-labextensions"
extensions.mkdir(exist_ok=True)
link = extensions / "tfos-notebook"
if not link.is_symlink():
    link.symlink_to(BUILT, target_is_directory=True)
c.LabServerApp.extra_labextensions_path = [  # noqa: F821
    str(extensions), c.LabServerApp.extra_labextensions_path]  # noqa: F821
