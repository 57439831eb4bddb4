"""What a run's Parquet outputs hold, for a scheduler's lineage (summary.json's `files`):
each file's name in DIR, rows, bytes and columns (name, Arrow type, the description its
writer gave it), read from the files' footers after they are written, never from the rows."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from batchval._internal.place.names import WRITTEN_NAMES

# The data files a scheduler sees as a run's outputs: a dry run's and verify's are not the
# run's own, and summary, manifest and report are about the data, not data.
DATA_NAMES: tuple[str, ...] = tuple(
    name
    for name in WRITTEN_NAMES
    if name.endswith(".parquet") and not name.startswith("dry_run") and name != "verify.parquet"
)


def described(folder: Path, names: Iterable[str] = DATA_NAMES) -> tuple[dict[str, Any], ...]:
    """Each of `names` that is a Parquet file in `folder`: its name, rows, bytes and
    columns."""
    found = []
    for name in names:
        path = folder / name
        # batchval writes its files whole in DIR, never through a link: a link, or a file
        # that is not Parquet, at one of its names is not its output, and is never read.
        if path.is_symlink() or not path.is_file():
            continue
        try:
            with pq.ParquetFile(path) as file:
                schema, rows = file.schema_arrow, file.metadata.num_rows
        except (OSError, pa.ArrowException):  # not a Parquet file: not one of the run's
            continue
        columns = [
            {
                "name": field.name,
                "type": str(field.type),
                "description": (field.metadata or {}).get(b"description", b"").decode(),
            }
            for field in schema
        ]
        found.append({"name": name, "rows": rows, "bytes": path.stat().st_size, "columns": columns})
    return tuple(found)
