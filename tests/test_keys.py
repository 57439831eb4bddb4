"""Idempotency keys: deterministic, run-scoped, request-shaped."""

from __future__ import annotations

import datetime as dt
import json

from hypothesis import given
from hypothesis import strategies as st

from batchval.run.keys import idempotency_key, new_run_id

requests = st.fixed_dictionaries(
    {
        "postcode": st.sampled_from(["SW1A 2AA", "M1 1AE", "CF10 1AA"]),
        "propertyType": st.sampled_from(["flat", "terraced", "detached"]),
    },
    optional={
        "bedrooms": st.integers(0, 20),
        "floorAreaSqm": st.integers(10, 2000),
        "reference": st.text(max_size=64),
    },
).map(lambda body: json.dumps(body, sort_keys=True, separators=(",", ":")))


@given(run_id=st.text(min_size=1, max_size=40), request=requests)
def test_same_request_same_key(run_id: str, request: str) -> None:
    """The same run id and request always give the same key, within 8 to 128 characters."""
    key = idempotency_key(run_id, request)
    assert key == idempotency_key(run_id, request)
    assert 8 <= len(key) <= 128
    assert key.isascii()


@given(request=requests, other=requests)
def test_any_change_of_a_sent_field_gives_a_new_key(request: str, other: str) -> None:
    """Different canonical requests never share a key."""
    if request != other:
        assert idempotency_key("run", request) != idempotency_key("run", other)


def test_run_id_scopes_the_key() -> None:
    """The same request in two runs gets two keys (each night pays for fresh figures)."""
    request = '{"bedrooms":3,"postcode":"SW1A 2AA","propertyType":"terraced"}'
    assert idempotency_key("night-1", request) != idempotency_key("night-2", request)


def test_new_run_ids_differ_and_start_with_the_time() -> None:
    """Two run ids made in the same second still differ."""
    now = dt.datetime(2026, 11, 22, 1, 30, tzinfo=dt.UTC)
    first, second = new_run_id(now), new_run_id(now)
    assert first != second
    assert first.startswith("20261122T013000Z-")
