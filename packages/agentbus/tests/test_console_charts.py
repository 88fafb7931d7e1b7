"""The console's SVG charts (``agentbus.console.charts``): well-formed XML whatever the numbers
and labels, labels escaped, one mark per point, edge or span, every coordinate finite."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

from agentbus.console.charts import bar_chart, talk_graph, timeline
from hypothesis import given
from hypothesis import strategies as st

SVG = "{http://www.w3.org/2000/svg}"
labels = st.text(min_size=1, max_size=20)
amounts = st.floats(min_value=0, max_value=1e9, allow_nan=False)


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # noqa: S314 - the charts' own output, not outside input


def _numbers(svg: str) -> list[float]:
    return [float(v) for v in re.findall(r' (?:x|y|x1|y1|x2|y2|cx|cy|width|height)="([^"]+)"', svg)]


@given(st.lists(st.tuples(labels, amounts), max_size=40))
def test_bars(points: list[tuple[str, float]]) -> None:
    svg = bar_chart(points)
    root = _parse(svg)
    assert len(root.findall(f".//{SVG}rect")) == len(points)
    assert all(math.isfinite(n) and n >= 0 for n in _numbers(svg))


@given(st.lists(labels, min_size=1, max_size=12, unique=True), st.data())
def test_graph(names: list[str], data: st.DataObject) -> None:
    nodes = [(f"n{i}", name) for i, name in enumerate(names)]
    ids = [n for n, _ in nodes]
    edges = data.draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids),
                                         st.integers(0, 10**6)), max_size=30))  # fmt: skip
    svg = talk_graph(nodes, edges)
    root = _parse(svg)
    assert len(root.findall(f".//{SVG}line")) == len(edges)
    assert len(root.findall(f".//{SVG}g/{SVG}text")) == len(names)


@given(st.lists(st.tuples(labels, st.floats(0, 1e7), st.floats(0, 1e7)), max_size=20))
def test_timeline(rows: list[tuple[str, float, float]]) -> None:
    spans = [(label, min(a, b), max(a, b)) for label, a, b in rows]
    svg = timeline(spans)
    if not spans:
        assert svg == ""
        return
    assert len(_parse(svg).findall(f".//{SVG}rect")) == len(spans)
    assert all(math.isfinite(n) for n in _numbers(svg))


def test_labels_are_escaped() -> None:
    svg = bar_chart([("<script>alert(1)</script>", 1.0)])
    assert "<script>" not in svg
    assert "&lt;script&gt;" in svg
