"""The run's provenance: `manifest.json`, and the same JSON in the key-value metadata of
results.parquet and problems.parquet (key `batchval.manifest`), so that a results file
carries its own provenance wherever it is copied.

It says what was valued and how: the input file's SHA-256 (of the file the rows were
read from) and how it was read (its format, the encoding a CSV was decoded with and
whether it was found from its bytes, a workbook's sheet), the settings the run used
with the client secret removed, the batchval version, the run id, and the model builds
and `indexedTo` months the valuations came from, each with the rows it covers. It is
built before the files are written (the checkpoint gives the models and months,
`Checkpoint.answer_values`), so the three copies are one text.

A secret can never be written: the settings' JSON has no client secret, and the whole
text is scrubbed with the `Redactor` (every known secret, and any bearer token) first.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from batchval._internal.contract import SCHEMA_VERSION, names_facts
from batchval._internal.logs import Redactor
from batchval._version import __version__

MANIFEST_NAME = "manifest.json"
METADATA_KEY = "batchval.manifest"
# What the checkpoint is asked for (`Checkpoint.answer_values`): the answer's paths.
ANSWER_PATHS: tuple[str, str] = ("$.model.version", "$.valuation.indexedTo")


@dataclasses.dataclass(frozen=True, slots=True)
class Manifest:
    run_id: str
    mode: str  # test or live, from the API's answers (unknown before the first)
    input_path: str
    input_sha256: str | None
    settings: Mapping[str, Any]  # Settings.to_json(): no client secret
    model_versions: Mapping[Any, int]  # model.version as the API wrote it -> rows
    indexed_to: Mapping[Any, int]  # indexedTo month (None: absent) -> rows
    written_at: str
    batchval_version: str = __version__
    # The charges ledger's figures when the files were written (`store/charges.Money`).
    charges: Mapping[str, Any] | None = None
    # How the input was read (`input.ReadAs.to_json()`: format, encoding and whether it
    # was found from the bytes, sheet), beside its path and hash.
    input_read: Mapping[str, Any] | None = None
    # The house price index the loans were rolled forward by (`valuations/indexing`).
    index: Mapping[str, Any] | None = None

    @classmethod
    def of_answers(cls, answers: Iterable[tuple[Any, ...]], **given: Any) -> Manifest:
        """From `Checkpoint.answer_values(*ANSWER_PATHS)`: (version, month, rows) rows."""
        versions: Counter[Any] = Counter()
        months: Counter[Any] = Counter()
        for version, month, rows in answers:
            versions[version] += int(rows)
            months[month] += int(rows)
        return cls(model_versions=dict(versions), indexed_to=dict(months), **given)

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "mode": self.mode,
            "batchval_version": self.batchval_version,
            "schema_version": SCHEMA_VERSION,
            "written_at": self.written_at,
            "input": {
                "path": self.input_path,
                "sha256": self.input_sha256,
                **(self.input_read or {}),
            },
            "settings": dict(self.settings),
            "model_versions": [
                {"version": version, "rows": rows}
                for version, rows in sorted(self.model_versions.items(), key=_by_value)
            ],
            "indexed_to": [
                {"month": month, "rows": rows}
                for month, rows in sorted(self.indexed_to.items(), key=_by_value)
            ],
            "charges": None if self.charges is None else dict(self.charges),
            # The data bundled with batchval that the outputs' words come from.
            "reference_data": {
                "local_authority_names": names_facts(),
                **({} if self.index is None else {"index": dict(self.index)}),
            },
        }

    def text(self, redactor: Redactor) -> str:
        """The manifest as indented JSON, scrubbed of every secret `redactor` knows."""
        return redactor.scrub(json.dumps(self.to_json(), indent=2, ensure_ascii=False))

    def scrubbed(self, redactor: Redactor) -> dict[str, Any]:
        """`to_json()` after the scrub: what manifest.json holds."""
        found: dict[str, Any] = json.loads(self.text(redactor))
        return found

    def metadata(self, redactor: Redactor) -> dict[str, str]:
        """The Parquet key-value metadata that carries the manifest."""
        return {METADATA_KEY: json.dumps(self.scrubbed(redactor), ensure_ascii=False)}


def _by_value(item: tuple[Any, int]) -> tuple[bool, str]:
    value = item[0]
    return (value is None, str(value))  # in order, an absent month last


def read_metadata(metadata: Mapping[bytes, bytes] | None) -> dict[str, Any] | None:
    """The manifest in a Parquet file's key-value metadata (`pq.read_schema(path).metadata`),
    or None when it has none."""
    text = (metadata or {}).get(METADATA_KEY.encode())
    if text is None:
        return None
    found: dict[str, Any] = json.loads(text)
    return found


def input_columns(manifest: object) -> dict[str, str]:
    """The run's `input.columns` (field -> the input's column) in a manifest read back,
    or none: what the lender columns were found by (`report`, `export`)."""
    settings = manifest.get("settings") if isinstance(manifest, dict) else None
    columns = ((settings or {}).get("input") or {}).get("columns")
    if not isinstance(columns, dict):
        return {}
    return {str(k): str(v) for k, v in columns.items() if isinstance(v, str)}
