"""The property-type and built-form wordings lenders, the EPC register and HM Land Registry
use, read without a `values` map.

A propertyType value that is not one of the API's codes as it stands (after the config's
`values` and the default spelling rule: `Semi-Detached` is `semi_detached`) is looked up
here by its wording key: lower case, every run of characters that are not letters or
digits one space (`Flat/Maisonette` is `flat maisonette`, `End-Terrace House` is
`end terrace house`). A wording gives a propertyType and, where it says one, a builtForm
(`End Terrace House` gives `terraced` and `end_terrace`): one column feeds both fields,
and a builtForm column of the file's own wins over the one a wording implies.

Two wordings say only half: `House` and `Bungalow` (the EPC register's property types)
take their propertyType from the row's builtForm (`Semi-Detached` gives `semi_detached`,
any terrace gives `terraced`), as the EPC's pair of columns does. Without a builtForm,
and for a wording that is none of the API's types (`Park Home`, Land Registry's `O`),
the row is a problem (`ambiguous_value`) that says what to send.

A builtForm value the file says it does not know (`NO DATA!`, the EPC's, or `Unknown`)
is a missing builtForm (the field is optional), not a problem.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Mapping

# A propertyType that needs the row's builtForm to say which of the API's types it is.
NEEDS_BUILT_FORM = "needs_built_form"

_NOT_WORD = re.compile(r"[^0-9a-z]+")


def wording_key(text: str) -> str:
    """`flat maisonette` of `Flat/Maisonette`: how wordings are compared. Text that
    starts as a spreadsheet formula does (= + - @) is no wording (its key is empty)."""
    if text.strip().startswith(("=", "+", "-", "@")):
        return ""
    return _NOT_WORD.sub(" ", text.lower()).strip()


@dataclasses.dataclass(frozen=True, slots=True)
class Wording:
    """What a wording says: a propertyType (or NEEDS_BUILT_FORM), and a builtForm when it
    says one; or, for a wording none of the API's types fits, why (`unplaced`)."""

    property_type: str | None
    built_form: str | None = None
    unplaced: str | None = None


def _table() -> dict[str, Wording]:
    table: dict[str, Wording] = {}

    def say(wording: Wording, *keys: str) -> None:
        for key in keys:
            table[key] = wording

    detached = Wording("detached", "detached")
    say(detached, "d", "det", "detached house", "detached property", "detached bungalow")
    say(detached, "link detached", "link detached house")
    semi = Wording("semi_detached", "semi_detached")
    say(semi, "s", "semi", "semi detached", "semi detached house", "semi detached bungalow")
    say(semi, "semidetached", "semidetached house", "semi house")
    say(Wording("terraced"), "t", "terrace", "terraced", "terrace house", "terraced house")
    say(Wording("terraced"), "terraced bungalow", "townhouse", "town house")
    for place, form in (
        ("mid", "mid_terrace"),
        ("end", "end_terrace"),
        ("end of", "end_terrace"),
        ("enclosed mid", "enclosed_mid_terrace"),
        ("enclosed end", "enclosed_end_terrace"),
    ):
        for noun in ("terrace", "terraced"):
            for after in ("", " house", " bungalow"):
                say(Wording("terraced", form), f"{place} {noun}{after}")
    say(Wording("flat"), "f", "flat", "flats", "maisonette", "flat maisonette")
    say(Wording("flat"), "maisonette flat", "apartment", "flat apartment", "apartment flat")
    say(Wording("flat"), "studio", "studio flat", "studio apartment", "penthouse")
    say(Wording("flat"), "purpose built flat", "converted flat", "ground floor flat")
    say(Wording(NEEDS_BUILT_FORM), "house", "bungalow")
    none_fits = (
        "is none of the API's property types (detached, semi_detached, terraced, flat): "
        "map it under input.values.propertyType in the config if one fits, or leave the "
        "row out"
    )
    say(Wording(None, unplaced=none_fits), "park home", "mobile home", "caravan", "houseboat")
    say(Wording(None, unplaced=none_fits), "o", "other", "land", "commercial")
    return table


WORDINGS: Mapping[str, Wording] = types.MappingProxyType(_table())

# What a built form gives a `House` or a `Bungalow`.
PROPERTY_TYPE_OF_FORM: Mapping[str, str] = types.MappingProxyType(
    {
        "detached": "detached",
        "semi_detached": "semi_detached",
        "mid_terrace": "terraced",
        "end_terrace": "terraced",
        "enclosed_mid_terrace": "terraced",
        "enclosed_end_terrace": "terraced",
    }
)

# builtForm wordings beyond the default spelling rule; None: the file does not know.
BUILT_FORM_WORDINGS: Mapping[str, str | None] = types.MappingProxyType(
    {
        **{
            key: wording.built_form
            for key, wording in WORDINGS.items()
            if wording.built_form is not None and len(key) > 1
        },
        "no data": None,
        "not recorded": None,
        "unknown": None,
        "n a": None,
        "not known": None,
    }
)


def needs_a_built_form(text: str) -> str:
    """The problem's words for a `House` or `Bungalow` with no builtForm."""
    return (
        f"says {text.strip()!r} but not which kind: give the row a builtForm (a built form "
        "column such as the EPC's: Detached, Semi-Detached, Mid-Terrace...), or map it "
        "under input.values.propertyType in the config"
    )
