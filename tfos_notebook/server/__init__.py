"""Jupyter server extension: the runs registry over REST, for the JupyterLab extension.

Enabled by the installed package (``etc/jupyter/jupyter_server_config.d/tfos_notebook.json``);
its routes live under ``<base_url>tfos-notebook/api/`` (see ``handlers.py``). It only reads and
writes the on-disk runs registry: no Spark, TensorFlow or kernel code runs in the Jupyter server.
"""

from __future__ import annotations

from .app import load_jupyter_server_extension


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Tell jupyter_server which module loads the extension."""
    return [{"module": "tfos_notebook.server"}]


_load_jupyter_server_extension = load_jupyter_server_extension

__all__ = ["load_jupyter_server_extension"]
