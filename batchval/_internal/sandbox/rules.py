"""The server's checks of a ValuationRequest (docs/api.md, sections 3 and 6).

Written apart from batchval's own input validation on purpose: the sandbox plays the
server, and two independent readings of the rules catch each other's mistakes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from batchval._internal import api, postcodes

PROPERTY_TYPES = frozenset(api.PROPERTY_TYPES)
BUILT_FORMS = frozenset(api.BUILT_FORMS)
WALLS = frozenset(api.WALLS_ENERGY_EFFICIENCY)
INCLUDES = frozenset(api.INCLUDE_ITEMS)
FIELDS = frozenset(api.REQUEST_FIELDS) | {"include"}


@dataclasses.dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is an `invalid-request` (400)."""

    code: str  # invalid_value, unknown_field, missing_field, malformed_json
    detail: str


def _is_int(value: Any) -> bool:
    # JSON has one number type: 3.0 is the integer 3 (as JSON Schema reads it), 3.5 is not.
    if isinstance(value, float):
        return math.isfinite(value) and value.is_integer()
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool)


def _int_in(body: Mapping[str, Any], name: str, low: int, high: int) -> Refusal | None:
    value = body[name]
    if not _is_int(value) or not low <= value <= high:
        return Refusal("invalid_value", f"{name} must be an integer from {low} to {high}")
    return None


def _enum(body: Mapping[str, Any], name: str, allowed: frozenset[str]) -> Refusal | None:
    value = body[name]
    if not isinstance(value, str) or value not in allowed:
        listed = ", ".join(sorted(allowed))
        return Refusal("invalid_value", f"{name} must be one of {listed}")
    return None


def check_request(body: Any) -> Refusal | None:
    """The first rule the body breaks, or None when it is a valid request."""
    if not isinstance(body, dict):
        return Refusal("invalid_value", "the body must be a JSON object")
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        return Refusal("unknown_field", f"unknown field: {unknown[0]}")
    for name in ("postcode", "propertyType"):
        if name not in body:
            return Refusal("missing_field", f"{name} is required")
    if "bedrooms" not in body and "floorAreaSqm" not in body:
        return Refusal("missing_field", "one of bedrooms or floorAreaSqm is required")
    postcode = body["postcode"]
    if not isinstance(postcode, str) or postcodes.normalise(postcode) is None:
        return Refusal("invalid_value", "postcode must be a full UK postcode")
    checks: list[Refusal | None] = [_enum(body, "propertyType", PROPERTY_TYPES)]
    if "bedrooms" in body:
        checks.append(_int_in(body, "bedrooms", 0, 20))
    if "floorAreaSqm" in body:
        area = body["floorAreaSqm"]
        if not _is_number(area) or not 10 <= area <= 2000:
            checks.append(Refusal("invalid_value", "floorAreaSqm must be a number from 10 to 2000"))
    if "yearBuilt" in body:
        checks.append(_int_in(body, "yearBuilt", 1500, 2100))
    if "builtForm" in body:
        checks.append(_enum(body, "builtForm", BUILT_FORMS))
    if "wallsEnergyEfficiency" in body:
        checks.append(_enum(body, "wallsEnergyEfficiency", WALLS))
    if "reference" in body:
        checks.append(_check_reference(body["reference"]))
    if "include" in body:
        checks.append(_check_include(body["include"]))
    return next((c for c in checks if c is not None), None)


def _check_reference(reference: Any) -> Refusal | None:
    if not isinstance(reference, str) or len(reference) > 64:
        return Refusal("invalid_value", "reference must be a string of at most 64 characters")
    if postcodes.contains_postcode(reference):
        return Refusal("invalid_value", "reference must not be a name or an address")
    return None


def _check_include(include: Any) -> Refusal | None:
    if not isinstance(include, list) or not all(isinstance(i, str) for i in include):
        return Refusal("invalid_value", "include must be an array of strings")
    bad = sorted(set(include) - INCLUDES)
    if bad:
        return Refusal("invalid_value", f"include item not allowed: {bad[0]}")
    return None


def canonical(body: Mapping[str, Any]) -> dict[str, Any]:
    """The request as the idempotency store compares it: include is a set, postcode normal."""
    out = dict(body)
    out["postcode"] = postcodes.normalise(str(body["postcode"]))
    for name in ("bedrooms", "yearBuilt"):
        if name in out:
            out[name] = int(out[name])
    if "include" in out:
        out["include"] = sorted(set(out["include"]))
    return out
