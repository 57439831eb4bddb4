"""sandbox/ledger.py: keys charged twice are live charges one account paid for more
than once; a test client's free valuations and another account's own are not."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from support import LIVE, TEST, env_for, portfolio, run_in_process

from batchval._internal.sandbox.ledger import ChargeRecord, Ledger
from batchval._internal.sandbox.server import RunningSandbox

AT = dt.datetime(2026, 11, 27, 12, tzinfo=dt.UTC)


def _charge(client_id: str, key: str, credits: int, kind: str = "valuation") -> ChargeRecord:
    return ChargeRecord(AT, client_id, kind, credits, key, "val-1", 1_000)


@pytest.mark.parametrize(
    ("charges", "twice"),
    [
        # The same key valued by the test client (free) and the live client: no double charge.
        ([("sandbox-test", "k1", 0), ("sandbox-live", "k1", 10)], {}),
        # The test client twice: nothing was paid.
        ([("sandbox-test", "k1", 0), ("sandbox-test", "k1", 0)], {}),
        # Two live accounts, each its own valuation once.
        ([("live-a", "k1", 10), ("live-b", "k1", 10)], {}),
        # One live account paid twice for one key: the promise broken.
        ([("live-a", "k1", 10), ("live-a", "k1", 10), ("live-b", "k2", 10)], {"live-a": ["k1"]}),
        (
            [
                ("live-a", "k2", 10),
                ("live-a", "k2", 10),
                ("live-b", "k2", 10),
                ("live-b", "k2", 10),
            ],
            {"live-a": ["k2"], "live-b": ["k2"]},
        ),
    ],
)
def test_keys_charged_twice_are_live_charges_per_account(
    charges: list[tuple[str, str, int]], twice: dict[str, list[str]]
) -> None:
    ledger = Ledger()
    ledger.charges.extend(_charge(*charge) for charge in charges)
    ledger.charges.append(_charge("live-a", "k9", 10, kind="street-analysis"))
    ledger.charges.append(_charge("live-a", "k9", 10, kind="street-analysis"))
    assert ledger.keys_charged_twice_by_account() == twice
    assert ledger.keys_charged_twice() == sorted({k for keys in twice.values() for k in keys})
    snapshot = ledger.snapshot({})
    assert snapshot["keys_charged_twice_by_account"] == twice


def test_a_test_run_and_a_live_run_of_one_file_charge_no_key_twice(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """One file valued the same day with the test client, then the live one: the same keys
    (they come from the request and the day, never the credentials), each paid once."""
    source = portfolio(tmp_path / "book.csv", 5)
    for name, credentials in (("test", TEST), ("live", LIVE)):
        run = ("run", str(source), "--out", str(tmp_path / name))
        env = env_for(served, credentials)
        assert run_in_process(*run, env=env, monkeypatch=monkeypatch, capsys=capsys)[0] == 0
    ledger = served.sandbox.ledger
    assert sorted(ledger.charges_by_key().values()) == [2] * 5  # both runs, the same keys
    assert ledger.keys_charged_twice() == []
    assert ledger.snapshot({})["keys_charged_twice_by_account"] == {}
    assert ledger.credits_charged() == 50
