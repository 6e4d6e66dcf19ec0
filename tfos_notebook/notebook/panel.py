"""A TensorBoard panel: TensorBoard's page in a frame with a show/hide toggle, from core widgets.

The monitor places the panel's two parts apart (the toggle in its header, the frame below the
logs); ``%tfos_tensorboard`` displays a panel on its own (``widget`` holds both parts).

The frame is live: its document (``livetb.js``, the frame's ``srcdoc``) opens TensorBoard once the
run has something to show and keeps it reloading as points, runs, tag groups and the Profile tab
appear, as the JupyterLab panel does; no widget beyond core ipywidgets' HTML is needed for it.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

DEFAULT_HEIGHT = 600
WAITING = "TensorBoard opens here once the run's nodes write their first summaries."


def live_document(url: str) -> str:
    """The frame's document: TensorBoard at ``url`` (a full URL or a path on the page's origin),
    opened once it has a run and reloaded every second (see ``livetb.js``)."""
    script = resources.files(__package__).joinpath("livetb.js").read_text()
    literal = json.dumps(url).replace("<", "\\u003c")
    return ("<!doctype html><html><head><style>html,body{margin:0;height:100%}"
            "iframe{border:0;width:100%;height:100%}"
            "#tfos-waiting{font:13px sans-serif;color:#6b7280;padding:8px}</style></head><body>"
            f'<div id="tfos-waiting">{html.escape(WAITING)}</div>'
            f"<script>const TENSORBOARD_URL = {literal};\n{script}</script></body></html>")


class TensorBoardPanel:
    """TensorBoard in an iframe, hidden until :meth:`show` gives it a URL.

    ``toggle`` (a ToggleButton) shows or hides ``frame`` (an HTML widget holding the iframe, or a
    one-line note once TensorBoard is stopped or failed to start); ``url`` is what the iframe
    shows (None without one).
    """

    def __init__(self) -> None:
        import ipywidgets as w

        self.url: str | None = None
        self.toggle = w.ToggleButton(description="Hide TensorBoard", value=True, icon="line-chart",
                                     tooltip="Show or hide the run's TensorBoard",
                                     layout=w.Layout(width="auto", display="none"))
        self.frame = w.HTML(layout=w.Layout(display="none"))
        self.toggle.observe(self._toggled, names="value")
        self._widget = None

    @property
    def widget(self) -> Any:
        """The toggle above the frame, for a panel shown on its own."""
        if self._widget is None:
            import ipywidgets as w

            self._widget = w.VBox([self.toggle, self.frame])
        return self._widget

    def show(self, url: str, height: int = DEFAULT_HEIGHT) -> None:
        """Show TensorBoard at ``url`` (a full URL or a path on the page's origin), live."""
        doc = html.escape(live_document(url), quote=True)
        self.url = url
        self.frame.value = (f'<iframe class="tfos-tensorboard" data-url="{html.escape(url, quote=True)}" '
                            f'srcdoc="{doc}" title="TensorBoard" '
                            f'style="width:100%;height:{int(height)}px;border:0"></iframe>')
        self.toggle.layout.display = ""
        self.toggle.value = True
        self.frame.layout.display = ""

    def note(self, text: str, error: bool = False) -> None:
        """Replace the iframe with one line of ``text`` (TensorBoard stopped, or did not start)."""
        colour = "#b91c1c" if error else "#6b7280"
        self.url = None
        self.frame.value = f'<div style="color:{colour}">{html.escape(text)}</div>'
        self.toggle.layout.display = "none"
        self.frame.layout.display = ""

    def _toggled(self, change: dict) -> None:
        shown = bool(change["new"])
        self.frame.layout.display = "" if shown else "none"
        self.toggle.description = "Hide TensorBoard" if shown else "Show TensorBoard"

    def __repr__(self) -> str:
        return f"TensorBoard at {self.url}" if self.url else "TensorBoard panel (empty)"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = repr(self)
        return bundle
