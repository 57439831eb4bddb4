"""Idempotency keys: one per distinct request of a run, the same on every resume.

A key is a hash of the run id and the canonical request JSON (sorted keys, absent
fields left out, `include` sorted and unique: built by the input stage). It never
depends on the credentials, which rotate, nor on the row, so that identical rows share
one key, one call and one charge. A corrected request (a floor area added after
`floor-area-required`) is a different JSON and so gets a new key, as the API asks.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

KEY_PREFIX = "bv1-"  # bump when the derivation changes, so old and new keys never meet


def idempotency_key(run_id: str, request_json: str) -> str:
    """A 52-character key, inside the API's 8 to 128."""
    digest = hashlib.sha256(f"{run_id}\n{request_json}".encode()).hexdigest()
    return KEY_PREFIX + digest[:48]


def new_run_id(now: dt.datetime) -> str:
    """A fresh run id: readable time first, then randomness so two starts never collide."""
    return f"{now.astimezone(dt.UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"
