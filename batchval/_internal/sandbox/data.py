"""The sandbox's figures: fake, plausible and deterministic.

The one public surface over `figures` (valuations), `commentary`, `streets` (street
analyses), `market` (places, prices, the house price index) and `seeded` (drawing).

How figures are derived
-----------------------
Nothing is random and nothing is read from disk. Each figure is drawn from a BLAKE2b
hash of a label and the geography it belongs to (postcode, sector, district or local
authority) and, for monthly data, the month: the same input gives the same output in
every process, on every run (Python's salted `hash()` is never used). Time enters only
through the month of `now`: a valuation depends on the request and that month (never on
`reference`); a street analysis on the postcode and that month, `generatedAt` aside.

- Local authority: a code fixed per postcode district: E09 London, E08 metropolitan
  areas, W06 Welsh areas (CF, LD, LL, NP, SA), else E06 (about a third) or E07, each
  followed by six digits within the real numbering ranges.
- Prices: a price per sqm for the district (inner London about 8,600, outer London
  5,600, the South 3,900, elsewhere 2,900, Wales 2,300, the North 2,200, each times a
  district factor of 0.85 to 1.2) times the floor area and factors for the property
  type, year built, built form and wall efficiency (absent details count as average);
  moved by the local index from the model build (November 2024) to `indexedTo`;
  clamped to £60,000..£5,000,000 and rounded to £1,000.
- Range: low < estimate < high always (at least £1,000 either side). Half-width 6% to
  11% of the estimate per sector, 1.6 times that when dataQuality is partial, skewed
  upwards. Coverage 0.80 to 0.90 per sector, 0.06 less when partial.
- dataQuality is `full` when floorAreaSqm, yearBuilt, builtForm and
  wallsEnergyEfficiency were all sent, else `partial`.
- indexedTo is the month two months before `now`.

The documented None and absent rules
------------------------------------
- Typical floor area is None (so a valuation from bedrooms alone raises
  FloorAreaUnknown, the API's 422 floor-area-required) for flats with 7 or more
  bedrooms, any property with 13 or more bedrooms, and detached houses with 0 bedrooms.
  Otherwise base + per-bedroom area (flat 24 + 20 per bedroom, terraced 38 + 17,
  semi-detached 45 + 17, detached 55 + 22) times a district factor of 0.9 to 1.1.
- The house price index is unpublished for about 6% of local authorities: there,
  `indexedTo` is absent, the figures are not moved, the commentary's momentum is
  `unknown` and the street analysis's priceIndex is null.
- Rebuild cost: a flat gives reason `flat`; a floor area outside 30..1000 sqm gives
  reason `size`; otherwise a range rounded to £1,000 with prices as of the last
  quarter-end month at least three months before `now`.
- Commentary texts are fixed templates with the figures filled in; `location` names the
  nearest station of the street analysis's transport list, so the two agree.
- Commentary: for about 15% of postcode sectors ("thin market data") marketSignals and
  areaInsights are absent and marketMomentum is `unknown`. Elsewhere each of the 14
  areaInsights members is absent for about 25% of sectors, drawn per member (the
  object is left out should all be absent).
- Street analysis, nothing held (None, the API's 404 not-found): the unit (last two
  letters) is ZZ, or the postcode's region is not England and Wales nor a Scottish
  border district (so also every postcode of an unknown area, such as ZZ1 4AA).
- Street analysis, null members: soldPrices for about 10% of postcodes (and whenever no
  sale was drawn); crime for about 8% of sectors; rental for about 12% of districts;
  energy for about 10% of postcodes; priceIndex as above. Inside them: rental grossYield,
  netYield and basis null for about 15% of districts, rentToIncome for about 20%;
  energy gas (with gasPenetration and vsGasPct) null for about 12% of postcodes,
  electricityEconomy7 for about 55%; priceIndex salesVolume null for the newest two
  months. Transport has 0 to 6 stops.
"""

from __future__ import annotations

from batchval._internal.sandbox.figures import FloorAreaUnknown, typical_floor_area, valuation_parts
from batchval._internal.sandbox.market import local_authority
from batchval._internal.sandbox.streets import street_analysis_body

__all__ = [
    "FloorAreaUnknown",
    "local_authority",
    "street_analysis_body",
    "typical_floor_area",
    "valuation_parts",
]
