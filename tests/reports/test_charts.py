"""The report's charts (`reports/charts`): axes that count things count them whole."""

from __future__ import annotations

import re

import pytest

from batchval._internal.reports import charts


def _y_ticks(svg: str, ylabel: str) -> list[str]:
    """The tick labels of the y axis: the numbers the SVG writes just before its label."""
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    ticks: list[str] = []
    for text in reversed(texts[: texts.index(ylabel)]):
        if not re.fullmatch(r"-?[\d.,]+", text):
            break
        ticks.append(text)
    return ticks


@pytest.mark.parametrize(
    ("svg", "ylabel"),
    [
        pytest.param(
            charts.bars(["0-60", "over 100"], [1, 2], title="t", ylabel="homes"),
            "homes",
            id="bars",
        ),
        pytest.param(
            charts.histogram([100_000.0, 200_000.0, 300_000.0], title="t", xlabel="x"),
            "homes",
            id="histogram",
        ),
        pytest.param(
            charts.over_time([0.0, 20.0], {"calls": [0.0, 3.0]}, title="t"), "so far", id="pace"
        ),
    ],
)
def test_counts_are_ticked_in_whole_numbers(svg: str, ylabel: str) -> None:
    """A few homes (or calls) are never ticked 0.25, 0.5, 0.75."""
    ticks = _y_ticks(svg, ylabel)
    assert len(ticks) >= 2
    assert [t for t in ticks if "." in t] == []


def test_bars_on_two_axes_have_a_legend_naming_both() -> None:
    """Loans and their balance side by side: a legend says which bars are which (the two
    labels appear twice, once on each axis and once in the legend); one axis, no legend."""
    both = charts.bars(
        ["0-60", "over 100"], [1, 2], title="t", ylabel="loans", second=[5e5, 1e6],
        second_label="loan balance",
    )  # fmt: skip
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", both)
    assert texts.count("loans") == 2
    assert texts.count("loan balance") == 2
    alone = re.findall(
        r"<text[^>]*>([^<]*)</text>", charts.bars(["a"], [1], title="t", ylabel="loans")
    )
    assert alone.count("loans") == 1
