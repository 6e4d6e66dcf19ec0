"""The Profile tab of a run's TensorBoard: whether TensorBoard has it here, and where it opens.

The tab is the ``tensorboard-plugin-profile`` package (XProf), installed with
``pip install "tfos_notebook[profile]"``. It reads ``plugins/profile/<session>/<host>.xplane.pb``
under TensorBoard's log directory, which is where ``Run.profile`` puts each node's trace (one
"host" per node), and it needs no TensorFlow in TensorBoard's process.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from ..errors import TFOSError

PLUGIN_PACKAGE = "tensorboard-plugin-profile"


class ProfilePluginMissing(TFOSError):
    """TensorBoard on the driver has no Profile tab to show a trace in."""


def has_profile_plugin() -> bool:
    """Whether TensorBoard here loads a ``profile`` plugin (an entry point of ``tensorboard_plugins``)."""
    return any(ep.name == "profile" for ep in entry_points(group="tensorboard_plugins"))


def check_profile_plugin() -> None:
    """Raise ``ProfilePluginMissing``, saying how to install it, unless TensorBoard has the Profile tab."""
    if not has_profile_plugin():
        raise ProfilePluginMissing(
            f"TensorBoard on the driver has no Profile tab: the {PLUGIN_PACKAGE} package is not installed. Install "
            f'it with pip install "tfos_notebook[profile]" (or pip install {PLUGIN_PACKAGE}) in the kernel\'s '
            "Python, then start the run's TensorBoard again (%tfos_tensorboard RUN --stop, then %tfos_tensorboard "
            "RUN) and profile")


def profile_url(tensorboard_url: str) -> str:
    """Where a TensorBoard's Profile tab opens."""
    return f"{tensorboard_url}#profile"
