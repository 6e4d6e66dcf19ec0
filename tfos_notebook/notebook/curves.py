"""Small line charts of a run's reported metrics, as inline SVG.

Plain SVG in an HTML widget renders wherever core ipywidgets do (Databricks included) and needs no
JavaScript. One chart per metric (``loss`` first), one line per node, the x axis in steps or
epochs as the nodes reported them.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

NODE_COLOURS = ("#2563eb", "#ea580c", "#16a34a", "#9333ea", "#db2777", "#0891b2", "#ca8a04", "#4b5563")
WIDTH, HEIGHT, PAD = 220, 90, 4
MAX_CHARTS = 4


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def chart_svg(title: str, lines: Sequence[tuple[str, str, Sequence[tuple[int, float]]]],
              width: int = WIDTH, height: int = HEIGHT) -> str:
    """One chart: ``lines`` are ``(node name, colour, [(step, value), ...])``; empty when no line
    has points.

    The y range is the values' own (a flat line sits in the middle); the corners say the range.
    """
    lines = [line for line in lines if line[2]]
    points = [p for _, _, pts in lines for p in pts]
    if not points:
        return ""
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    y0, y1 = min(p[1] for p in points), max(p[1] for p in points)
    xs, ys = (x1 - x0) or 1, (y1 - y0) or 1
    top, bottom = 14, height - 12

    def xy(step: int, value: float) -> tuple[str, str]:
        x = PAD + (step - x0) / xs * (width - 2 * PAD)
        y = (top + bottom) / 2 if y1 == y0 else bottom - (value - y0) / ys * (bottom - top)
        return f"{x:.1f}", f"{y:.1f}"

    paths = []
    for node, colour, pts in lines:
        coords = " ".join(",".join(xy(s, v)) for s, v in pts)
        paths.append(f'<polyline data-node="{html.escape(node)}" points="{coords}" fill="none" '
                     f'stroke="{colour}" stroke-width="1.5"><title>{html.escape(node)}</title></polyline>')
        if len(pts) == 1:
            cx, cy = xy(*pts[0])
            paths.append(f'<circle cx="{cx}" cy="{cy}" r="2" fill="{colour}"/>')
    last = lines[0][2][-1][1]
    label = (f'<text x="{PAD}" y="10" font-size="10" fill="#374151">{html.escape(title)} {_fmt(last)}</text>'
             f'<text x="{width - PAD}" y="10" font-size="9" fill="#6b7280" text-anchor="end">'
             f"max {_fmt(y1)}</text>"
             f'<text x="{width - PAD}" y="{height - 2}" font-size="9" fill="#6b7280" text-anchor="end">'
             f"min {_fmt(y0)} · step {x1}</text>")
    return (f'<svg class="tfos-curve" data-metric="{html.escape(title)}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg" '
            f'style="border:1px solid #e5e7eb;border-radius:3px;background:white;margin-right:6px">'
            f'{label}{"".join(paths)}</svg>')


def curves_html(nodes: Iterable[tuple[str, dict[str, list[tuple[int, float]]]]]) -> str:
    """The run's charts side by side: ``nodes`` are ``(name, {metric: [(step, value), ...]})``.

    ``loss`` comes first, then the other metrics in the order nodes reported them, at most
    ``MAX_CHARTS``; a legend names each node's colour. Empty before any node reported.
    """
    nodes = [(name, curves) for name, curves in nodes if curves]
    metrics: list[str] = []
    for _, curves in nodes:
        metrics += [m for m in curves if m not in metrics]
    metrics.sort(key=lambda m: m != "loss")
    colours = [NODE_COLOURS[i % len(NODE_COLOURS)] for i in range(len(nodes))]
    charts = [chart_svg(m, [(name, colour, curves.get(m, [])) for (name, curves), colour in zip(nodes, colours, strict=True)])
              for m in metrics[:MAX_CHARTS]]
    if not charts:
        return ""
    legend = " ".join(f'<span style="color:{colour}">&#9632; {html.escape(name)}</span>'
                      for (name, _), colour in zip(nodes, colours, strict=True))
    return (f'<div class="tfos-curves"><div style="display:flex;flex-wrap:wrap">{"".join(charts)}</div>'
            f'<div style="font-size:0.85em">{legend}</div></div>')
