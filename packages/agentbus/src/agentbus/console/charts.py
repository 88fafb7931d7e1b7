"""Charts as SVG text, rendered on the server: pure functions of the numbers, property-tested.
Every label is escaped; every coordinate is finite and inside the view box."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from html import escape

__all__ = ["bar_chart", "talk_graph", "timeline"]


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(value: str) -> str:
    """Escaped, without the characters XML cannot hold at all (a model name is harness input)."""
    return escape(_NOT_XML.sub("", value))


def _num(value: float) -> str:
    return f"{value:.1f}"


def bar_chart(
    points: Sequence[tuple[str, float]], *, width: int = 640, height: int = 220, unit: str = ""
) -> str:
    """Vertical bars, one per (label, value), scaled to the largest value."""
    top = max((v for _l, v in points), default=0.0)
    top = top if top > 0 else 1.0
    plot_h = height - 40
    step = (width - 20) / max(len(points), 1)
    bars: list[str] = []
    for i, (label, value) in enumerate(points):
        h = max(value, 0.0) / top * plot_h
        x = 10 + i * step
        title = _text(f"{label}: {value:g}{unit}")
        bars.append(
            f'<g><title>{title}</title><rect class="bar" x="{_num(x + step * 0.1)}" '
            f'y="{_num(10 + plot_h - h)}" width="{_num(step * 0.8)}" height="{_num(h)}"/>'
            f'<text x="{_num(x + step / 2)}" y="{height - 12}" text-anchor="middle" '
            f'font-size="10">{_text(label[-10:])}</text></g>'
        )
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">'
            f'{"".join(bars)}</svg>')  # fmt: skip


def talk_graph(
    nodes: Sequence[tuple[str, str]], edges: Sequence[tuple[str, str, int]], *, size: int = 420
) -> str:
    """Agents on a circle (id, label), directed edges (source, target, messages) as lines whose
    width grows with the messages they carried."""
    centre, radius = size / 2, size / 2 - 50
    where: dict[str, tuple[float, float]] = {}
    for i, (node_id, _label) in enumerate(nodes):
        angle = 2 * math.pi * i / max(len(nodes), 1) - math.pi / 2
        where[node_id] = (centre + radius * math.cos(angle), centre + radius * math.sin(angle))
    heaviest = max((w for _s, _t, w in edges), default=1) or 1
    parts: list[str] = []
    for source, target, weight in edges:
        if source not in where or target not in where:
            continue
        (x1, y1), (x2, y2) = where[source], where[target]
        stroke = 1 + 7 * max(weight, 0) / heaviest
        parts.append(
            f'<line class="edge" x1="{_num(x1)}" y1="{_num(y1)}" x2="{_num(x2)}" y2="{_num(y2)}" '
            f'stroke-width="{_num(stroke)}" marker-end="url(#arrow)">'
            f"<title>{_text(source)} -&gt; {_text(target)}: {weight}</title></line>"
        )
    for node_id, label in nodes:
        x, y = where[node_id]
        parts.append(
            f'<g class="node"><circle cx="{_num(x)}" cy="{_num(y)}" r="18"/>'
            f'<text x="{_num(x)}" y="{_num(y + 32)}" text-anchor="middle" font-size="11">'
            f"{_text(label)}</text></g>"
        )
    arrow = ('<defs><marker id="arrow" viewBox="0 0 10 10" refX="28" refY="5" markerWidth="6" '
             'markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/>'
             "</marker></defs>")  # fmt: skip
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" role="img" '
            f'viewBox="0 0 {size} {size}" width="{size}" height="{size}">{arrow}'
            f'{"".join(parts)}</svg>')  # fmt: skip


def timeline(rows: Sequence[tuple[str, float, float]], *, width: int = 640) -> str:
    """One bar per (label, start ms, end ms), on a shared time axis from the first start."""
    if not rows:
        return ""
    first = min(r[1] for r in rows)
    span = max(max(r[2] for r in rows) - first, 1.0)
    height = 24 * len(rows) + 10
    plot_w = width - 170
    bars: list[str] = []
    for i, (label, start, end) in enumerate(rows):
        x = 160 + (start - first) / span * plot_w
        w = max((end - start) / span * plot_w, 2.0)
        y = 5 + i * 24
        bars.append(
            f'<g><text x="0" y="{y + 14}" font-size="11">{_text(label)}</text>'
            f'<rect class="span" x="{_num(x)}" y="{y}" width="{_num(min(w, width - x))}" '
            f'height="18"><title>{_text(label)}: {end - start:g} ms</title></rect></g>'
        )
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" role="img" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">'
            f'{"".join(bars)}</svg>')  # fmt: skip
