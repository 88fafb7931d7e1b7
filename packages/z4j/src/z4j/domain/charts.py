"""Chart geometry for the trends page: pure, no I/O; the template turns it into SVG.

A chart has a plot area inside fixed margins. The vertical scale runs from zero to a "nice"
ceiling (1, 2 or 5 times a power of ten, at least the largest value), so the gridlines fall on
round numbers. Bucket ``i`` of ``n`` is drawn centred at ``(i + 0.5) / n`` of the plot width;
a missing value (no task finished, so no runtime) breaks a line instead of dropping it to zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

WIDTH, HEIGHT = 720, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 24
MAX_X_TICKS = 6


def nice_ceiling(value: float) -> float:
    """The least of 1, 2, 5 times a power of ten that is at least ``value``; 1 for nothing, or
    for less than a millionth (no quantity charted is that small)."""
    if not value >= 1e-6 or not math.isfinite(value):
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for factor in (1, 2, 5, 10):
        if factor * power >= value:
            return float(factor * power)
    return float(10 * power)  # pragma: no cover - the loop always returns


@dataclass(frozen=True, slots=True)
class Line:
    label: str
    css: str
    path: str  # SVG path data, "" when the series has no value
    points: list[tuple[float, float]] = field(default_factory=list)  # a dot on each value


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    title: str


@dataclass(frozen=True, slots=True)
class Tick:
    at: float
    text: str


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    ceiling: float
    lines: list[Line] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    plot_width: int = WIDTH - LEFT - RIGHT
    plot_height: int = HEIGHT - TOP - BOTTOM

    @property
    def bottom(self) -> int:
        return self.top + self.plot_height

    @property
    def right(self) -> int:
        return self.left + self.plot_width


def _x(i: int, n: int) -> float:
    return LEFT + (i + 0.5) * (WIDTH - LEFT - RIGHT) / n


def _y(value: float, ceiling: float) -> float:
    plot = HEIGHT - TOP - BOTTOM
    return TOP + plot - min(max(value, 0.0), ceiling) / ceiling * plot


def y_steps(ceiling: float) -> int:
    """Gridlines above zero: 4 for a ceiling of 2 x 10^k, else 5, so each falls on a round
    number (0.5, 0.2, 1 times a power of ten)."""
    return 4 if f"{ceiling:.0e}".startswith("2") else 5


def _axes(title: str, ceiling: float, labels: Sequence[str], fmt: Callable[[float], str]) -> Chart:
    steps = y_steps(ceiling)
    y_ticks = [
        Tick(round(_y(ceiling * k / steps, ceiling), 1), fmt(ceiling * k / steps))
        for k in range(steps + 1)
    ]
    n = len(labels)
    every = max(1, math.ceil(n / MAX_X_TICKS))
    x_ticks = [Tick(round(_x(i, n), 1), labels[i]) for i in range(0, n, every)]
    return Chart(title, ceiling, y_ticks=y_ticks, x_ticks=x_ticks)


def line_chart(
    title: str,
    labels: Sequence[str],
    series: Sequence[tuple[str, str, Sequence[float | None]]],
    fmt: Callable[[float], str],
    floor_ceiling: float = 0.0,
) -> Chart:
    """Lines of ``(label, css class, values)``, one value per label; the scale's ceiling is
    at least ``floor_ceiling``."""
    top = max((v for _l, _c, values in series for v in values if v is not None), default=0.0)
    chart = _axes(title, nice_ceiling(max(top, floor_ceiling)), labels, fmt)
    n = len(labels)
    for label, css, values in series:
        parts: list[str] = []
        points: list[tuple[float, float]] = []
        pen_down = False
        for i, value in enumerate(values):
            if value is None:
                pen_down = False
                continue
            x, y = round(_x(i, n), 1), round(_y(value, chart.ceiling), 1)
            parts.append(f"{'L' if pen_down else 'M'}{x:.1f},{y:.1f}")
            points.append((x, y))
            pen_down = True
        chart.lines.append(Line(label, css, " ".join(parts), points))
    return chart


def bar_chart(
    title: str, labels: Sequence[str], values: Sequence[float], fmt: Callable[[float], str]
) -> Chart:
    """One bar per label, titled ``label: value``; the scale reaches at least 5 (counts)."""
    chart = _axes(title, nice_ceiling(max([*values, 5.0])), labels, fmt)
    n = len(labels)
    slot = (WIDTH - LEFT - RIGHT) / max(n, 1)
    width = max(slot * 0.8, 1.0)
    for i, value in enumerate(values):
        y = _y(value, chart.ceiling)
        chart.bars.append(
            Bar(round(_x(i, n) - width / 2, 2), round(y, 2), round(width, 2),
                round(chart.top + chart.plot_height - y, 2), f"{labels[i]}: {fmt(value)}")
        )  # fmt: skip
    return chart
