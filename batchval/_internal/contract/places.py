"""Local authorities by name: the partner API answers `local_authority` with the Office for
National Statistics' code of the council (`E07000216`), a reader wants `Waverley`.

`local_authorities.csv` beside this module holds `code,name` for every local authority
district of England and Wales (E06 unitary authorities, E07 non-metropolitan districts, E08
metropolitan districts, E09 London boroughs, W06 Welsh principal areas) in use at any time
since 2011: the current ones as of ONS's 2025 vintage (LAD25: after the April 2025 recodes
of Barnsley, E08000038, and Sheffield, E08000039), and the retired ones with their last
name, since an answer valued against an older geography may still carry one (the
Buckinghamshire districts, Northamptonshire's, Cumbria's, North Yorkshire's, Somerset's).
Names are ONS's LADnnNM spellings (`Bristol, City of`), Welsh areas in their English form.

Source: Office for National Statistics, local authority district names and codes, through
drkane/geo-lookups' `la_all_codes.csv` (commit e20a072, June 2026, built from the ONS Open
Geography Portal), its English and Welsh rows kept. Its names equal those of ONS's own LAD
December 2019 and April 2020 files for every code those hold, and of its May 2024 file.
Contains public sector information licensed under the Open Government Licence v3.0.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType

DATA_FILE = "local_authorities.csv"
# Said wherever the names are shown (the report): their source and licence.
NAMES_SOURCE = (
    "Local authority names: Office for National Statistics, local authority district "
    "names and codes (2025); a code not in that list is shown as it came, marked "
    '"(name unknown)". Contains public sector '
    "information licensed under the Open Government Licence v3.0."
)


@functools.cache
def authority_names() -> Mapping[str, str]:
    """Every known code with its name, read from the package's data once."""
    text = (
        resources.files("batchval._internal.contract")
        .joinpath(DATA_FILE)
        .read_text(encoding="utf-8")
    )
    rows = csv.DictReader(io.StringIO(text))
    return MappingProxyType({row["code"]: row["name"] for row in rows})


# The list's date: ONS's 2025 vintage (LAD25), drawn in June 2026 (see the module).
NAMES_VINTAGE = "LAD25 (ONS, 2025; drawn 2026-06)"


def names_facts() -> dict[str, object]:
    """What the manifest says of the list the names came from: its vintage, codes, hash."""
    data = resources.files("batchval._internal.contract").joinpath(DATA_FILE).read_bytes()
    return {
        "source": "Office for National Statistics, local authority district names and codes",
        "vintage": NAMES_VINTAGE,
        "codes": len(authority_names()),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


UNKNOWN_NAME = "{code} (name unknown)"


def authority_name(code: str | None) -> str | None:
    """The local authority's name; a code not in the list as it came, marked
    `(name unknown)` (the code is still the most a reader can be told, and the mark says
    it is not a name); a blank code as it is; None for None."""
    if code is None:
        return None
    name = authority_names().get(code)
    if name is not None or not code.strip():
        return name or code
    return UNKNOWN_NAME.format(code=code)
