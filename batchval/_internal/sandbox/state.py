"""What the sandbox remembers between calls: the idempotency store, the valuations made
and the street analyses read.

Elsewhere: accounts live in the config (mutable `Account` records), tokens in `auth`,
what was counted and charged in `limits` and the ledger. Nothing here checks a rule:
the routes decide, this remembers.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import string
from typing import Any

# Further reads of a postcode within this window are free (docs/api.md, section 2).
STREET_REPEAT_WINDOW = dt.timedelta(days=30)
_ID_ALPHABET = string.digits + string.ascii_lowercase


@dataclasses.dataclass(slots=True)
class StoredCall:
    """An idempotency key's first request and, once done, its 201 body (only a created
    valuation is stored: every other answer is worked out again on a retry)."""

    request: dict[str, Any]
    done: bool = False
    body: bytes = b""


def new_valuation_id(rng: random.Random) -> str:
    """`val_` and 26 lower-case letters or digits (docs/api.md, section 2), drawn from `rng`."""
    return "val_" + "".join(rng.choice(_ID_ALPHABET) for _ in range(26))


class SandboxState:
    def __init__(self) -> None:
        self._stored: dict[tuple[str, str], StoredCall] = {}
        # valuation id -> (owning client id, the Valuation's JSON without `charge`)
        self._valuations: dict[str, tuple[str, bytes]] = {}
        self._streets: dict[tuple[str, str], tuple[dt.datetime, dict[str, Any]]] = {}

    # --- the idempotency store -------------------------------------------------------

    def stored_call(self, client_id: str, key: str | None) -> StoredCall | None:
        return self._stored.get((client_id, key)) if key is not None else None

    def hold(self, client_id: str, key: str | None, request: dict[str, Any]) -> StoredCall:
        """A new entry for the request, kept under the key if there is one."""
        entry = StoredCall(request)
        if key is not None:
            self._stored[(client_id, key)] = entry
        return entry

    def release(self, client_id: str, key: str | None) -> None:
        """Nothing was created: the key is free again."""
        if key is not None:
            self._stored.pop((client_id, key), None)

    # --- valuations and street reads -------------------------------------------------

    def keep_valuation(self, valuation_id: str, client_id: str, body: bytes) -> None:
        self._valuations[valuation_id] = (client_id, body)

    def valuation(self, valuation_id: str, client_id: str) -> bytes | None:
        """A valuation's JSON, if it exists and belongs to `client_id`."""
        found = self._valuations.get(valuation_id)
        if found is None or found[0] != client_id:
            return None
        return found[1]

    def street_read(self, client_id: str, postcode: str, now: dt.datetime) -> dict[str, Any] | None:
        """The answer of the account's read of `postcode` in the last 30 days, if any."""
        held = self._streets.get((client_id, postcode))
        if held is not None and now - held[0] < STREET_REPEAT_WINDOW:
            return held[1]
        return None

    def keep_street_read(
        self, client_id: str, postcode: str, now: dt.datetime, answer: dict[str, Any]
    ) -> None:
        self._streets[(client_id, postcode)] = (now, answer)
