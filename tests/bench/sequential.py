"""The baseline: a plain sequential loop over a book, as anyone would first write it.

    python tests/bench/sequential.py BOOK OUT_JSONL
    (BATCHVAL_BASE_URL, BATCHVAL_AUTH_URL, BATCHVAL_CLIENT_ID, BATCHVAL_CLIENT_SECRET)

One httpx.Client (one kept-alive connection), one token, then for each CSV row: its
request as JSON, an Idempotency-Key hashed from it, one POST, the answer appended to a
JSON-lines file. A 429 waits its Retry-After, a 401 fetches a new token; nothing else
(no checkpoint, no validation beyond the CSV's own columns). Deliberately batchval-free:
it is the yardstick batchval's CPU per valuation is divided by. Prints one JSON line.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx


def token(http: httpx.Client, auth_url: str) -> str:
    answer = http.post(
        f"{auth_url}/oauth2/token",
        data={
            "grant_type": "client_credentials",
            "client_id": os.environ["BATCHVAL_CLIENT_ID"],
            "client_secret": os.environ["BATCHVAL_CLIENT_SECRET"],
        },
    )
    answer.raise_for_status()
    return str(answer.json()["access_token"])


def request_of(row: dict[str, str]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "postcode": row["postcode"],
        "propertyType": row["property_type"],
        "bedrooms": int(row["bedrooms"]),
        "reference": row["reference"],
    }
    if row["floor_area_sqm"]:
        body["floorAreaSqm"] = float(row["floor_area_sqm"])
    if row["year_built"]:
        body["yearBuilt"] = int(row["year_built"])
    return body


def main(book: Path, out: Path) -> None:
    base_url, auth_url = os.environ["BATCHVAL_BASE_URL"], os.environ["BATCHVAL_AUTH_URL"]
    valued = problems = rate_limited = 0
    with httpx.Client(timeout=35) as http, book.open(newline="") as rows, out.open("wb") as sink:
        bearer = token(http, auth_url)
        for row in csv.DictReader(rows):
            body = json.dumps(request_of(row), sort_keys=True, separators=(",", ":")).encode()
            key = "seq-" + hashlib.sha256(body).hexdigest()[:48]
            while True:
                answer = http.post(
                    f"{base_url}/valuations",
                    content=body,
                    headers={
                        "Authorization": f"Bearer {bearer}",
                        "Content-Type": "application/json",
                        "Idempotency-Key": key,
                    },
                )
                if answer.status_code == 429:
                    rate_limited += 1
                    time.sleep(float(answer.headers.get("Retry-After", "1")))
                elif answer.status_code == 401:
                    bearer = token(http, auth_url)
                else:
                    break
            sink.write(answer.content + b"\n")
            if answer.status_code == 201:
                valued += 1
            else:
                problems += 1
    print(json.dumps({"valued": valued, "problems": problems, "rate_limited": rate_limited}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
