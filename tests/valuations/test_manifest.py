"""The run's manifest (valuations/manifest): manifest.json and the same JSON in both Parquet
files' metadata, with the provenance of the figures and never a secret."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support import (
    LIVE,
    InProcess,
    assert_no_secrets,
    env_for,
    input_read,
    outputs,
    portfolio,
)

from batchval._internal.logs import Redactor
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.valuations.manifest import (
    MANIFEST_NAME,
    METADATA_KEY,
    Manifest,
    read_metadata,
)

# Touches the calendar: `make test-dates` runs it at each hard instant (tests/clocks.py).
pytestmark = pytest.mark.dates


def manifest_of(out: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((out / MANIFEST_NAME).read_text(encoding="utf-8"))
    return found


@pytest.mark.slow
def test_manifest_says_where_the_figures_come_from(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """manifest.json names the input's hash and how it was read, the run id, the mode, the
    settings without the secret, and every model version and indexedTo month with the rows
    they cover."""
    source = portfolio(tmp_path / "book.csv", 12, duplicates=2)
    with source.open("a", encoding="utf-8") as stream:
        stream.write("LN-bad,SW1A 2AA,castle,3,CASE-bad\n")  # one input problem
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    results, problems, summary = outputs(out)
    assert (results.height, problems.height) == (12, 1)
    manifest = manifest_of(out)
    assert manifest["run_id"] == summary["run_id"]
    assert manifest["mode"] == "live"
    assert manifest["input"] == {
        "path": str(source),
        "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        **input_read(encoding="utf-8", encoding_detected=True),
    }
    assert manifest["settings"]["api"] == {
        "base_url": served.base_url,
        "auth_url": served.auth_url,
        "client_id": LIVE.client_id,
    }
    assert manifest["settings"]["lender"]["ltv_bands"] == [60, 75, 80, 85, 90, 95, 100]
    builds = {dt.datetime.fromisoformat(m["version"]) for m in manifest["model_versions"]}
    assert builds == set(results["model_version"].unique().to_list())
    assert sum(m["rows"] for m in manifest["model_versions"]) == 12
    months = {m["month"]: m["rows"] for m in manifest["indexed_to"]}
    counted = results.group_by("indexed_to").len()
    assert months == dict(counted.iter_rows())


@pytest.mark.slow
def test_manifest_is_in_both_parquet_files(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """results.parquet and problems.parquet carry the manifest under batchval.manifest,
    the same as manifest.json, readable with pyarrow alone."""
    source = portfolio(tmp_path / "book.csv", 5)
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    manifest = manifest_of(out)
    for name in ("results.parquet", "problems.parquet"):
        metadata = pq.read_schema(out / name).metadata
        assert json.loads(metadata[METADATA_KEY.encode()]) == manifest
        assert read_metadata(metadata) == manifest
        assert metadata[b"batchval.schema_version"] == manifest["schema_version"].encode()


@pytest.mark.slow
def test_no_secret_in_any_file(served: RunningSandbox, tmp_path: Path, batchval: InProcess) -> None:
    """With the API configured in a config file, the client secret is nowhere in DIR."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "api:\n"
        f"  base_url: {served.base_url}\n"
        f"  auth_url: {served.auth_url}\n"
        f"  client_id: {LIVE.client_id}\n"
        f"  client_secret: {LIVE.client_secret}\n",
        encoding="utf-8",
    )
    source = portfolio(tmp_path / "book.csv", 4)
    out = tmp_path / "out"
    env = {k: v for k, v in env_for(served).items() if not k.startswith("BATCHVAL_")}
    done = batchval("run", str(source), "--out", str(out), "--config", str(config), env=env)
    assert done.returncode == 0, done.stderr
    assert manifest_of(out)["settings"]["api"]["client_id"] == LIVE.client_id
    for path in out.iterdir():
        if path.is_file():
            assert LIVE.client_secret.encode() not in path.read_bytes(), path.name
    assert_no_secrets(served, out, done.stdout, done.stderr)


def test_secret_scrubbed_wherever_it_is() -> None:
    """A secret that found its way into any value of the manifest is scrubbed out."""
    manifest = Manifest(
        run_id="day-2026-11-23",
        mode="live",
        input_path="/books/s3cret-value.csv",
        input_sha256=None,
        settings={"input": {"values": {"reference": {"x": "s3cret-value"}}}},
        model_versions={"2024-11-04T09:30:00Z": 3},
        indexed_to={"2026-09": 2, None: 1},
        written_at="2026-11-23T10:00:00+00:00",
    )
    redactor = Redactor(["s3cret-value"])
    assert "s3cret-value" not in manifest.text(redactor)
    assert "s3cret-value" not in json.dumps(manifest.metadata(redactor))
    found = manifest.scrubbed(redactor)
    assert found["indexed_to"] == [{"month": "2026-09", "rows": 2}, {"month": None, "rows": 1}]


@pytest.mark.slow
def test_dry_run_writes_no_manifest(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A dry run is not a run: no manifest.json."""
    source = portfolio(tmp_path / "book.csv", 3)
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), "--dry-run", env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert not (out / MANIFEST_NAME).exists()


def test_the_manifest_dates_the_local_authority_list_the_report_names_councils_from() -> None:
    """`reference_data.local_authority_names`: the list's vintage, how many codes, and
    the hash of the bundled file (what a reader checks a name against)."""
    import hashlib
    from importlib import resources

    from batchval._internal.contract.places import NAMES_VINTAGE, authority_names
    from batchval._internal.valuations.manifest import Manifest

    manifest = Manifest(
        run_id="r",
        mode="test",
        input_path="x.csv",
        input_sha256=None,
        settings={},
        model_versions={},
        indexed_to={},
        written_at="2026-12-06T00:00:00Z",
    ).to_json()
    facts = manifest["reference_data"]["local_authority_names"]
    data = (
        resources.files("batchval._internal.contract")
        .joinpath("local_authorities.csv")
        .read_bytes()
    )
    assert facts["vintage"] == NAMES_VINTAGE
    assert "2025" in facts["vintage"]
    assert facts["codes"] == len(authority_names()) > 300
    assert facts["sha256"] == hashlib.sha256(data).hexdigest()
