"""A plot of calls per second over a paced run against its hidden limit, as SVG written
by hand: no plotting library in the bench or in the project's dependencies."""

from __future__ import annotations

import math
from collections.abc import Sequence
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 760, 330
LEFT, RIGHT, TOP, BOTTOM = 56, 150, 34, 44
VALUED, REFUSED, LIMIT, TARGET = "#1f77b4", "#d62728", "#333333", "#2ca02c"


def _ticks(top: float, count: int = 5) -> list[float]:
    """Round steps from 0 to at least `top`."""
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [step * i for i in range(math.ceil(top / step) + 1)]


def rate_plot(title: str, per_second: Sequence[tuple[int, int]], limit: float) -> str:
    """`per_second`: (valuations, 429s) in each second of the sending phase."""
    seconds = max(1, len(per_second))
    y_ticks = _ticks(max([limit * 1.25, *(a + b for a, b in per_second)]))
    y_top = y_ticks[-1]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + plot_w * t / seconds

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v / y_top)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="20" font-size="14">{escape(title)}</text>',
    ]
    for value in y_ticks:
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
            'stroke="#e5e5e5"/>'
        )
        out.append(
            f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:g}</text>'
        )
    for t in _ticks(seconds, 8):
        if t <= seconds:
            out.append(
                f'<text x="{x(t):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{t:g}</text>'
            )
    out.append(
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 8}" text-anchor="middle">'
        "seconds into the sending phase</text>"
    )
    out.append(
        f'<text x="14" y="{TOP + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {TOP + plot_h / 2})">calls per second</text>'
    )
    # 429s as bars, stacked on the valuations of the same second.
    bar = plot_w / seconds
    for t, (valued, refused) in enumerate(per_second):
        if refused:
            top, bottom = y(valued + refused), y(valued)
            out.append(
                f'<rect x="{x(t):.1f}" y="{top:.1f}" width="{max(bar - 0.5, 0.5):.1f}" '
                f'height="{bottom - top:.1f}" fill="{REFUSED}" opacity="0.8"/>'
            )
    points = " ".join(f"{x(t + 0.5):.1f},{y(v):.1f}" for t, (v, _) in enumerate(per_second))
    out.append(f'<polyline points="{points}" fill="none" stroke="{VALUED}" stroke-width="1.8"/>')
    for value, colour, dash in ((limit, LIMIT, "6,4"), (0.95 * limit, TARGET, "2,3")):
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
            f'stroke="{colour}" stroke-dasharray="{dash}" stroke-width="1.4"/>'
        )
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>'
    )
    legend = [
        (VALUED, "line", ["valuations (201)", "per second"]),
        (REFUSED, "bar", ["429s per second"]),
        (LIMIT, "6,4", ["hidden limit,", f"{limit:g}/s"]),
        (TARGET, "2,3", ["target,", f"0.95 × {limit:g}/s"]),
    ]
    for i, (colour, kind, words) in enumerate(legend):
        lx, ly = LEFT + plot_w + 12, TOP + 14 + 40 * i
        if kind == "bar":
            out.append(f'<rect x="{lx}" y="{ly - 6}" width="18" height="10" fill="{colour}"/>')
        else:
            dash = "" if kind == "line" else f' stroke-dasharray="{kind}"'
            out.append(
                f'<line x1="{lx}" x2="{lx + 18}" y1="{ly}" y2="{ly}" stroke="{colour}" '
                f'stroke-width="1.8"{dash}/>'
            )
        for j, word in enumerate(words):
            out.append(f'<text x="{lx + 24}" y="{ly + 4 + 14 * j}">{escape(word)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
