"""Idempotency keys: deterministic, run-scoped, request-shaped."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchval._internal.sending.keys import daily_run_id, idempotency_key, idempotency_keys

# Touches the calendar: `make test-dates` runs it at each hard instant (tests/clocks.py).
pytestmark = pytest.mark.dates

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


@given(run_id=st.text(min_size=1, max_size=40), batch=st.lists(st.none() | requests))
def test_a_batch_of_keys_is_each_key(run_id: str, batch: list[str | None]) -> None:
    """Keys made a batch at a time are byte for byte the keys made one at a time."""
    expected = [None if r is None else idempotency_key(run_id, r) for r in batch]
    assert idempotency_keys(run_id, batch) == expected


def test_the_key_is_fixed() -> None:
    """Keys are a contract: a DIR made by an earlier version resumes on them."""
    request = '{"bedrooms":3,"postcode":"SW1A 2AA","propertyType":"terraced"}'
    expected = "bv1-1602133ead3fa4bbc59ef464088cc54d77c3113397de3215"
    assert idempotency_keys("night-1", [request]) == [idempotency_key("night-1", request)]
    assert idempotency_key("night-1", request) == expected


@given(request=requests, other=requests)
def test_any_change_of_a_sent_field_gives_a_new_key(request: str, other: str) -> None:
    """Different canonical requests never share a key."""
    if request != other:
        assert idempotency_key("run", request) != idempotency_key("run", other)


def test_run_id_scopes_the_key() -> None:
    """The same request in two runs gets two keys (each night pays for fresh figures)."""
    request = '{"bedrooms":3,"postcode":"SW1A 2AA","propertyType":"terraced"}'
    assert idempotency_key("night-1", request) != idempotency_key("night-2", request)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (dt.datetime(2026, 11, 22, 0, 0, tzinfo=dt.UTC), "day-2026-11-22"),
        (dt.datetime(2026, 11, 22, 23, 59, 59, tzinfo=dt.UTC), "day-2026-11-22"),
        # 00:30 in UTC+2 is still the 21st in UTC: the day is always the UTC day.
        (
            dt.datetime(2026, 11, 22, 0, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            "day-2026-11-21",
        ),
    ],
)
def test_default_run_id_is_the_utc_day(now: dt.datetime, expected: str) -> None:
    """The default run id is the UTC day, the same on any machine at any hour of it."""
    assert daily_run_id(now) == expected


def test_same_request_same_day_same_key_anywhere() -> None:
    """Two runs of one request on one UTC day send the same key; the next day another."""
    body = '{"bedrooms":3,"postcode":"SW1A 2AA","propertyType":"terraced"}'
    morning = daily_run_id(dt.datetime(2026, 11, 22, 1, 0, tzinfo=dt.UTC))
    evening = daily_run_id(dt.datetime(2026, 11, 22, 22, 0, tzinfo=dt.UTC))
    tomorrow = daily_run_id(dt.datetime(2026, 11, 23, 1, 0, tzinfo=dt.UTC))
    assert idempotency_key(morning, body) == idempotency_key(evening, body)
    assert idempotency_key(morning, body) != idempotency_key(tomorrow, body)
