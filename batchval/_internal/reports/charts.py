"""Charts for `batchval report`, drawn by matplotlib and returned as inline SVG text.

Every chart is a plain function of its figures: no state, no file written, no font
fetched (the SVG keeps its text as text, in the browser's own sans-serif), so a report
stays one self-contained file that opens without a network.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: a cron job or a CI machine has none

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

# Typed loosely: matplotlib's stubs want each key as a Literal of its rcParams names.
_STYLE: dict[Any, Any] = {
    "svg.fonttype": "none",  # text stays text: smaller, searchable, no embedded glyphs
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "svg.hashsalt": "batchval",  # the same figures give the same SVG
}
_BLUE, _ORANGE, _GREY = "#2b6cb0", "#dd6b20", "#718096"


def _svg(figure: Figure) -> str:
    out = io.StringIO()
    figure.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(figure)
    text = out.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and doctype: inline in HTML


def _pounds(value: float, _position: object = None) -> str:
    if abs(value) >= 1_000_000:
        return f"£{value / 1_000_000:.1f}m"
    return f"£{value / 1000:.0f}k"


def _whole(axis: Any) -> None:
    """An axis that counts things (homes, postcodes, calls): whole numbers only, never
    2.5 homes."""
    axis.set_major_locator(MaxNLocator(integer=True))


def histogram(
    values: Sequence[float], *, title: str, xlabel: str, ylabel: str = "homes", bins: int = 40
) -> str:
    """The distribution of a figure in pounds (estimates), counted in `ylabel`."""
    with plt.rc_context(_STYLE):
        figure, axes = plt.subplots(figsize=(7, 3))
        axes.hist(values, bins=bins, color=_BLUE, edgecolor="white", linewidth=0.5)
        axes.xaxis.set_major_formatter(FuncFormatter(_pounds))
        _whole(axes.yaxis)
        axes.set(title=title, xlabel=xlabel, ylabel=ylabel)
        return _svg(figure)


def scatter(
    xs: Sequence[float], ys: Sequence[float], *, title: str, xlabel: str, ylabel: str
) -> str:
    """One point per home: the range's width (as a share of the estimate) by estimate."""
    with plt.rc_context(_STYLE):
        figure, axes = plt.subplots(figsize=(7, 3))
        axes.scatter(xs, ys, s=6, alpha=0.5, color=_BLUE, linewidths=0)
        axes.xaxis.set_major_formatter(FuncFormatter(_pounds))
        axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:.0%}"))
        axes.set(title=title, xlabel=xlabel, ylabel=ylabel)
        return _svg(figure)


def bars(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    title: str,
    ylabel: str,
    second: Sequence[float] | None = None,
    second_label: str = "",
) -> str:
    """Counts by category; `second` (e.g. balances) on its own axis beside them, then with
    a legend that says which colour is which."""
    with plt.rc_context(_STYLE):
        figure, axes = plt.subplots(figsize=(7, 3))
        positions = list(range(len(labels)))
        width = 0.4 if second is not None else 0.7
        axes.bar(
            [p - width / 2 if second is not None else p for p in positions],
            values,
            width=width,
            color=_BLUE,
            label=ylabel,
        )
        axes.set_xticks(positions, labels, rotation=30 if len(labels) > 6 else 0)
        _whole(axes.yaxis)
        axes.set(title=title, ylabel=ylabel)
        if second is not None:
            other = axes.twinx()
            other.bar(
                [p + width / 2 for p in positions],
                second,
                width=width,
                color=_ORANGE,
                label=second_label,
            )
            other.yaxis.set_major_formatter(FuncFormatter(_pounds))
            other.set_ylabel(second_label)
            other.grid(False)
            handles, names = axes.get_legend_handles_labels()
            more, more_names = other.get_legend_handles_labels()
            other.legend(handles + more, names + more_names, loc="upper right", frameon=False)
        return _svg(figure)


def over_time(
    seconds: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
) -> str:
    """Running totals (calls, credits, 429s) against seconds since the run began."""
    with plt.rc_context(_STYLE):
        figure, axes = plt.subplots(figsize=(7, 3))
        for (name, values), colour in zip(
            series.items(), (_BLUE, _ORANGE, _GREY, "#38a169"), strict=False
        ):
            axes.plot(seconds, values, marker="o", markersize=3, label=name, color=colour)
        _whole(axes.yaxis)  # calls, credits and 429s are counted
        axes.set(title=title, xlabel="seconds since the invocation began", ylabel="so far")
        axes.legend(loc="upper left", frameon=False)
        return _svg(figure)
