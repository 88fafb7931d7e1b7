"""Charts as SVG drawn on the server: no script, readable without colour (every bar carries
its number) and described for screen readers (``role="img"`` with the data as its label)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from markupsafe import Markup

ROW = 22
LABEL_WIDTH = 150
BAR_WIDTH = 260
WIDTH = LABEL_WIDTH + BAR_WIDTH + 60


def bar_width(count: int, largest: int) -> int:
    """Pixels of a bar: proportional to ``largest``, at least 2 for a nonzero count."""
    if count <= 0 or largest <= 0:
        return 0
    return max(2, round(BAR_WIDTH * count / largest))


def bars(title: str, items: Sequence[tuple[str, int]], *, css: str = "bar") -> Markup:
    """A horizontal bar chart of ``items`` (label, count)."""
    largest = max((count for _, count in items), default=0)
    described = ", ".join(f"{label}: {count}" for label, count in items) or "none"
    height = max(ROW, ROW * len(items))
    parts = [
        f'<svg class="chart" role="img" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" aria-label="{escape(title)}: {escape(described)}">'
        f"<title>{escape(title)}</title>"
    ]
    for i, (label, count) in enumerate(items):
        y = i * ROW
        width = bar_width(count, largest)
        key = "".join(c if c.isalnum() else "-" for c in label.lower())
        parts.append(
            f'<text x="0" y="{y + 15}">{escape(label)}</text>'
            f'<rect class="{css} {css}-{escape(key)}" x="{LABEL_WIDTH}" y="{y + 4}" '
            f'width="{width}" height="{ROW - 8}"></rect>'
            f'<text x="{LABEL_WIDTH + width + 6}" y="{y + 15}">{count}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every text in it was escaped above


def share(title: str, part: int, whole: int) -> Markup:
    """One bar filled to ``part`` of ``whole``, with the percentage written beside it."""
    fraction = part / whole if whole else 0.0
    text = f"{fraction:.0%}" if whole else "no agents"
    filled = round(BAR_WIDTH * fraction)
    return Markup(  # noqa: S704 - the title is escaped, the rest are numbers
        f'<svg class="chart" role="img" width="{BAR_WIDTH + 90}" height="{ROW}" '
        f'viewBox="0 0 {BAR_WIDTH + 90} {ROW}" aria-label="{escape(title)}: {text}">'
        f"<title>{escape(title)}</title>"
        f'<rect class="track" x="0" y="4" width="{BAR_WIDTH}" height="{ROW - 8}"></rect>'
        f'<rect class="fill" x="0" y="4" width="{filled}" height="{ROW - 8}"></rect>'
        f'<text x="{BAR_WIDTH + 8}" y="16">{text}</text></svg>'
    )
