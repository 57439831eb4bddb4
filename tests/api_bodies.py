"""A valuation as the API writes one (docs/api.md, Valuation), for the tests and benches
that need an answer's body without a sandbox: one body, each caller changing only what it
is about."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

VALUATION_ID = "val_" + "a" * 26


def valuation_body(
    valuation_id: str = VALUATION_ID,
    *,
    estimate: int = 250_000,
    low: int | None = None,
    high: int | None = None,
    coverage: float = 0.8,
    indexed_to: str | None = "2026-09",
    valued_at: str = "2026-11-23T10:00:00Z",
    quality: str = "full",
    model_version: str = "2026-10-01T00:00:00Z",
    echo: Mapping[str, Any] | None = None,
    **more: Any,
) -> dict[str, Any]:
    """A terraced home of 80 sqm in SW1A 2AA valued at `estimate` (its range 20,000 either
    side unless `low` and `high` say); `echo` changes the request's echo (`input`), `more`
    adds members (`reference`, `commentary`, `charge`) or replaces them."""
    figures: dict[str, Any] = {
        "estimate": estimate,
        "range": {
            "low": estimate - 20_000 if low is None else low,
            "high": estimate + 20_000 if high is None else high,
            "coverage": coverage,
        },
        "currency": "GBP",
    }
    if indexed_to is not None:
        figures["indexedTo"] = indexed_to
    return {
        "id": valuation_id,
        "valuedAt": valued_at,
        "valuation": figures,
        "location": {"sector": "SW1A 2", "localAuthority": "E09000033"},
        "dataQuality": quality,
        "model": {"version": model_version},
        "input": {
            "postcode": "SW1A 2AA",
            "propertyType": "terraced",
            "floorAreaSqm": 80,
            "floorAreaSource": "request",
            **(echo or {}),
        },
        **more,
    }
