"""The street part of `batchval report` for a `batchval streets` DIR: the street figures
of street_analysis.parquet (`streets/schema`), one line a postcode read.

Sold prices, crime, rents, energy use and the price index, each summed up over the
postcodes (medians, so that one odd street does not lead) and then listed by postcode,
the postcodes most rows asked for first.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from batchval._internal.reports import charts
from batchval._internal.reports.report_page import Section, cards, e, money, table
from batchval._internal.streets import STREETS_NAME

STREET_COLUMNS = ("postcode", "rows", "sold_prices", "crime", "rental", "energy", "price_index")
POSTCODES_LISTED = 50
AUTHORITIES_LISTED = 20
# The outcome's cards of a streets DIR: its rows get their street, its requests are
# postcodes.
OUTCOME_LABELS = {
    "valued": "rows with their street",
    "requests": "distinct postcodes",
}


def read_streets(out_dir: Path) -> pl.DataFrame | None:
    path = out_dir / STREETS_NAME
    if not path.is_file():
        return None
    frame = pl.scan_parquet(path)
    present = frame.collect_schema().names()
    return frame.select([c for c in STREET_COLUMNS if c in present]).collect()


def sections(streets: pl.DataFrame | None) -> list[Section]:
    if streets is None or streets.height == 0:
        return []
    found = [
        _sold(streets),
        _crime(streets),
        _rents(streets),
        _energy(streets),
        _index(streets),
        _postcodes(streets),
    ]
    return [s for s in found if s is not None]


def _field(section: str, *path: str) -> pl.Expr:
    expr = pl.col(section)
    for name in path:
        expr = expr.struct.field(name)
    return expr


def _median(streets: pl.DataFrame, expr: pl.Expr) -> float | None:
    value = streets.select(expr.median()).item()
    return None if value is None else float(value)


def _sold(streets: pl.DataFrame) -> Section | None:
    if "sold_prices" not in streets.columns:
        return None
    recent = streets.select(_field("sold_prices", "recent_median").alias("m")).to_series()
    sales = streets.select(_field("sold_prices", "total_sold")).to_series()
    years = streets.select(_field("sold_prices", "recent_median_years")).to_series().drop_nulls()
    body = cards(
        [
            ("postcodes with sales", int((sales.fill_null(0) > 0).sum())),
            ("sales in all", int(sales.fill_null(0).sum())),
            ("median of the recent medians", money(recent.median())),
            (
                "median of the all-time medians",
                money(_median(streets, _field("sold_prices", "overall_median"))),
            ),
        ]
    )
    values = [float(v) for v in recent.drop_nulls().to_list()]
    if values:
        span = f"last {int(years.mode()[0])} years" if years.len() else "recent years"
        body += charts.histogram(
            values,
            title=f"Median sale price by postcode ({span})",
            xlabel="recent median sale price",
            ylabel="postcodes",
            bins=min(40, max(5, len(values) // 3)),
        )
    return Section("Sold prices", body)


def _crime(streets: pl.DataFrame) -> Section | None:
    if "crime" not in streets.columns:
        return None
    rows = (
        streets.select(_field("crime", "by_type").alias("t"))
        .explode("t")
        .drop_nulls()
        .select(pl.col("t").struct.field("crime_type"), pl.col("t").struct.field("crime_count"))
    )
    if rows.height == 0:
        return Section("Crime", "<p>No crime figures were given.</p>")
    by_type = (
        rows.group_by("crime_type")
        .agg(pl.col("crime_count").sum().alias("crimes"))
        .sort(["crimes", "crime_type"], descending=[True, False])
    )
    months = sorted(m for m in streets.select(_field("crime", "month")).to_series().unique() if m)
    per_postcode = streets.select(
        _field("crime", "by_type").list.eval(pl.element().struct.field("crime_count")).list.sum()
    ).to_series()
    body = cards(
        [
            ("month", ", ".join(months) or "–"),
            ("crimes near all the postcodes", int(by_type.get_column("crimes").sum())),
            ("median a postcode", _whole(per_postcode.median())),
        ]
    )
    body += table(
        ["crime type", "crimes"],
        [[t.replace("-", " "), n] for t, n in by_type.iter_rows()],
    )
    return Section("Crime", body)


def _rents(streets: pl.DataFrame) -> Section | None:
    if "rental" not in streets.columns:
        return None
    body = cards(
        [
            ("median rent a month", money(_median(streets, _field("rental", "average_rent")))),
            ("median gross yield", _pct(_median(streets, _field("rental", "gross_yield")))),
            ("median rent growth a year", _pct(_median(streets, _field("rental", "rent_growth")))),
            ("median rent to income", _pct(_median(streets, _field("rental", "rent_to_income")))),
        ]
    )
    groups = (
        streets.select(_field("rental", "by_bedroom").alias("g"))
        .explode("g")
        .drop_nulls()
        .select(
            pl.col("g").struct.field("group"),
            pl.col("g").struct.field("average_rent"),
            pl.col("g").struct.field("annual_change_pct"),
        )
    )
    if groups.height:
        order = ["one", "two", "three", "fourOrMore"]
        by_group = groups.group_by("group").agg(
            pl.len().alias("postcodes"),
            pl.col("average_rent").median(),
            pl.col("annual_change_pct").median(),
        )
        ranked = sorted(
            by_group.iter_rows(named=True),
            key=lambda r: (order.index(r["group"]) if r["group"] in order else 99, r["group"]),
        )
        body += table(
            ["bedrooms", "postcodes", "median rent a month", "median change a year"],
            [
                [
                    _BEDROOMS.get(r["group"], r["group"]),
                    r["postcodes"],
                    money(r["average_rent"]),
                    _pct(r["annual_change_pct"]),
                ]
                for r in ranked
            ],
        )
    return Section("Rents", body)


_BEDROOMS = {"one": "1", "two": "2", "three": "3", "fourOrMore": "4 or more"}


def _energy(streets: pl.DataFrame) -> Section | None:
    if "energy" not in streets.columns:
        return None
    vs_electricity = streets.select(_field("energy", "vs_electricity_pct")).to_series()
    vs_gas = streets.select(_field("energy", "vs_gas_pct")).to_series()

    def kwh(*path: str) -> str:
        value = _median(streets, _field("energy", *path))
        return "–" if value is None else f"{value:,.0f} kWh"

    body = cards(
        [
            ("median electricity a meter", kwh("electricity", "median_kwh")),
            ("national electricity median", kwh("england_wales_electricity_median_kwh")),
            ("median gas a meter", kwh("gas", "median_kwh")),
            ("national gas median", kwh("england_wales_gas_median_kwh")),
            ("postcodes above the national electricity median", int((vs_electricity > 0).sum())),
            ("postcodes above the national gas median", int((vs_gas > 0).sum())),
        ]
    )
    return Section("Energy use", body)


def _index(streets: pl.DataFrame) -> Section | None:
    """The price index of each local authority, latest month first."""
    if "price_index" not in streets.columns:
        return None
    latest = (
        streets.select(
            _field("price_index", "local_authority").alias("authority"),
            _field("price_index", "months").list.first().alias("m"),
            pl.col("rows"),
        )
        .drop_nulls(["authority", "m"])
        .group_by("authority")
        .agg(pl.col("m").first(), pl.col("rows").sum())
        .sort(["rows", "authority"], descending=[True, False])
    )
    if latest.height == 0:
        return Section("Price index", "<p>No price index was given.</p>")
    shown = latest.head(AUTHORITIES_LISTED)
    body = table(
        ["local authority", "rows", "month", "average price", "index", "change over 12 months"],
        [
            [
                r["authority"],
                r["rows"],
                r["m"]["month"],
                money(r["m"]["average_price"]),
                r["m"]["index"],
                _pct(r["m"]["twelve_month_change_pct"]),
            ]
            for r in shown.iter_rows(named=True)
        ],
    )
    if latest.height > shown.height:
        body += f"<p class='note'>And {latest.height - shown.height:,} more local authorities.</p>"
    return Section("Price index", body)


def _postcodes(streets: pl.DataFrame) -> Section:
    """One line a postcode, the most asked for first."""
    frame = streets.select(
        pl.col("postcode"),
        pl.col("rows") if "rows" in streets.columns else pl.lit(None).alias("rows"),
        *_maybe(streets, "sold_prices", _field("sold_prices", "recent_median").alias("median")),
        *_maybe(streets, "sold_prices", _field("sold_prices", "total_sold").alias("sales")),
        *_maybe(
            streets,
            "crime",
            _field("crime", "by_type")
            .list.eval(pl.element().struct.field("crime_count"))
            .list.sum()
            .alias("crimes"),
        ),
        *_maybe(streets, "rental", _field("rental", "average_rent").alias("rent")),
        *_maybe(streets, "energy", _field("energy", "vs_electricity_pct").alias("electricity")),
    ).sort(["rows", "postcode"], descending=[True, False], nulls_last=True)
    shown = frame.head(POSTCODES_LISTED)
    headers = {
        "postcode": "postcode",
        "rows": "rows",
        "median": "recent median sale",
        "sales": "sales",
        "crimes": "crimes (month)",
        "rent": "rent a month",
        "electricity": "electricity against national",
    }
    money_columns, percent_columns = {"median", "rent"}, {"electricity"}
    lines = [
        [
            money(v) if c in money_columns else _pct(v, signed=True) if c in percent_columns else v
            for c, v in row.items()
        ]
        for row in shown.iter_rows(named=True)
    ]
    body = table([headers[c] for c in shown.columns], lines)
    if frame.height > shown.height:
        body += (
            f"<p class='note'>And {frame.height - shown.height:,} more postcodes: every one "
            f"is in {e(STREETS_NAME)}.</p>"
        )
    return Section("Postcodes", body)


def _maybe(streets: pl.DataFrame, column: str, expr: pl.Expr) -> Sequence[pl.Expr]:
    return [expr] if column in streets.columns else []


def _whole(value: object) -> int | None:
    return round(value) if isinstance(value, int | float) else None


def _pct(value: float | None, *, signed: bool = False) -> str:
    """A figure the API gives in percent (2.5 is `2.5 %`)."""
    if value is None:
        return "–"
    return f"{value:+.1f} %" if signed else f"{value:.1f} %"
