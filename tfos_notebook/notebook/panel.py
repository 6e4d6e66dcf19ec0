"""A TensorBoard panel: TensorBoard's page in a live frame with a show/hide toggle and a plain link
that opens it in a new tab, from core widgets.

The frame is live: its document (``livetb.js``, the frame's ``srcdoc``) opens TensorBoard once the
run has something to show and keeps it reloading as points, runs, tag groups and the Profile tab
appear, as the JupyterLab panel does; no widget beyond core ipywidgets' HTML is needed for it. It
reaches into TensorBoard's page only where the widget is drawn on TensorBoard's origin (behind
jupyter-server-proxy); elsewhere TensorBoard opens at once and reloads on its own period.

The link is what always works: a widget may be drawn in a frame of another origin than the page
(Databricks serves its widgets from a domain of their own), where TensorBoard's page may lack the
session cookie of the proxy in front of it or be refused in a frame; a new tab opens the URL on
its own.

The monitor places the panel's parts apart (the toggle and the link in its header, the frame below
the logs); ``%tfos_tensorboard`` displays a panel on its own (``widget`` holds them all).
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

from .frontend import widget_bundle

DEFAULT_HEIGHT = 600
WAITING = "TensorBoard opens here once the run's nodes write their first summaries."
LINK_TEXT = "Open TensorBoard in a new tab"


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
    one-line note once TensorBoard is stopped or failed to start); ``link`` (an HTML widget) opens
    the same URL in a new tab; ``url`` is what the iframe shows (None without one).
    """

    def __init__(self) -> None:
        import ipywidgets as w

        self.url: str | None = None
        self._height, self._loads = DEFAULT_HEIGHT, 0
        self.toggle = w.ToggleButton(description="Hide TensorBoard", value=True, icon="line-chart",
                                     tooltip="Show or hide the run's TensorBoard",
                                     layout=w.Layout(width="auto", display="none"))
        self.frame = w.HTML(layout=w.Layout(display="none"))
        self.link = w.HTML(layout=w.Layout(display="none", margin="0 0.5em"))
        self.toggle.observe(self._toggled, names="value")
        self._widget = None

    @property
    def widget(self) -> Any:
        """The toggle and the link above the frame, for a panel shown on its own."""
        if self._widget is None:
            import ipywidgets as w

            self._widget = w.VBox([w.HBox([self.toggle, self.link]), self.frame])
        return self._widget

    def show(self, url: str, height: int = DEFAULT_HEIGHT) -> None:
        """Show TensorBoard at ``url`` (a full URL or a path on the page's origin), live."""
        src = html.escape(url, quote=True)
        self.url, self._height, self._loads = url, height, 0
        self._frame()
        self.link.value = f'<a href="{src}" target="_blank" rel="noopener">{LINK_TEXT}</a>'
        self.link.layout.display = ""
        self.toggle.layout.display = ""
        self.toggle.value = True
        self.frame.layout.display = ""

    def reload(self) -> None:
        """Load TensorBoard's page afresh, and with it its list of dashboards and tag groups: what
        shows new runs and tabs where the frame's own script cannot reach into the page (a widget
        drawn on another origin than TensorBoard's, as on Databricks; see ``pagewatch.py``)."""
        if self.url is not None:
            self._loads += 1
            self._frame()

    def _frame(self) -> None:
        doc = html.escape(live_document(self.url) + f"<!-- load {self._loads} -->", quote=True)
        self.frame.value = (f'<iframe class="tfos-tensorboard" data-url="{html.escape(self.url, quote=True)}" '
                            f'srcdoc="{doc}" title="TensorBoard" '
                            f'style="width:100%;height:{int(self._height)}px;border:0"></iframe>')

    def note(self, text: str, error: bool = False) -> None:
        """Replace the iframe with one line of ``text`` (TensorBoard stopped, or did not start)."""
        colour = "#b91c1c" if error else "#6b7280"
        self.url = None
        self.frame.value = f'<div style="color:{colour}">{html.escape(text)}</div>'
        self.link.layout.display = "none"
        self.toggle.layout.display = "none"
        self.frame.layout.display = ""

    def _toggled(self, change: dict) -> None:
        shown = bool(change["new"])
        self.frame.layout.display = "" if shown else "none"
        self.toggle.description = "Hide TensorBoard" if shown else "Show TensorBoard"

    def __repr__(self) -> str:
        return f"TensorBoard at {self.url}" if self.url else "TensorBoard panel (empty)"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        bundle = widget_bundle(self.widget, **kwargs)
        bundle["text/plain"] = repr(self)
        return bundle
