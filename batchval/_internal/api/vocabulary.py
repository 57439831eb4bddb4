"""The API's words (docs/api.md, sections 3 and 4), named once for every part of batchval:
the input stage checks against them, the sandbox enforces them, the writer lays out its
columns by them."""

from __future__ import annotations

# The fields of a ValuationRequest that come from a row, in the order in which a row's
# problems are reported. `include` is not one: the run's default, or a row's own include
# column (read and checked apart, by batchval._internal.input), gives it.
REQUEST_FIELDS: tuple[str, ...] = (
    "postcode",
    "propertyType",
    "bedrooms",
    "floorAreaSqm",
    "yearBuilt",
    "builtForm",
    "wallsEnergyEfficiency",
    "reference",
)
PROPERTY_TYPES: tuple[str, ...] = ("detached", "semi_detached", "terraced", "flat")
BUILT_FORMS: tuple[str, ...] = (
    "detached",
    "semi_detached",
    "mid_terrace",
    "end_terrace",
    "enclosed_mid_terrace",
    "enclosed_end_terrace",
)
WALLS_ENERGY_EFFICIENCY: tuple[str, ...] = ("very_good", "good", "average", "poor", "very_poor")
INCLUDE_ITEMS: tuple[str, ...] = ("commentary", "rebuildCost")

# Commentary members (docs/api.md, section 4) and those of its areaInsights, in the
# document's order.
COMMENTARY_MEMBERS: tuple[str, ...] = (
    "summary",
    "rangeWidth",
    "rangeNote",
    "property",
    "location",
    "marketMomentum",
    "marketConditions",
    "energyEfficiency",
    "dataQuality",
    "marketSignals",
    "areaInsights",
    "disclaimer",
)
AREA_INSIGHTS_MEMBERS: tuple[str, ...] = (
    "seasonality",
    "growth",
    "benchmark",
    "priceVelocity",
    "marketStructure",
    "timing",
    "recovery",
    "investors",
    "resaleReturns",
    "newBuild",
    "propertyTypes",
    "streets",
    "priceSpread",
    "overview",
)

# The token scopes (section 5): live calls, charged; test mode, fake figures, never charged.
LIVE_SCOPE = "partners:read"
TEST_SCOPE = "partners:test"
# Not the API's: the member of a token answer by which batchval's own sandbox says it is
# one (`fake`, or `rehearsal` when started with --rehearsal); `--live` refuses `fake`.
SANDBOX_CLAIM = "batchval_sandbox"

# What the API charges and allows (docs/api.md, sections 2 and 6).
VALUATION_CREDITS = 10  # a valuation, with or without extras; 1 credit = 1p
DAILY_PAID_CALLS = 5_000  # paid calls a day per account, by default
# A street analysis's price is "not shown" (docs/api.md, 4.3): batchval assumes this much
# for --max-credits and --dry-run until a charge shows more (run.street_credits sets it).
STREET_CREDITS_ASSUMED = 20
