"""The reader measured alone, in a process of its own: read, validate and key a file.

    python tests/bench/reader_child.py BOOK [CHECKPOINT_DIR]

It does what `batchval run` does with each input batch (the runner's `_ingest`): every
row's canonical request keyed, rows and requests gathered for the checkpoint. With a
CHECKPOINT_DIR, the whole ingest is the runner's own (`ingest.ingest`: one transaction,
the indexes built at its end) into a checkpoint there. Prints one JSON line: rows, rows
keyed and the seconds from opening the file to the last batch (imports excluded; the
parent reads the process's peak RSS).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from batchval._internal.input import InputOptions, open_input
from batchval._internal.store.checkpoint import Checkpoint
from batchval._internal.store.database import Database
from batchval._internal.valuations.ingest import ingest, keyed_rows


def main(source: Path, into: Path | None) -> None:
    started = time.perf_counter()
    batches = open_input(source, InputOptions())
    if into is not None:
        checkpoint = Checkpoint(Database.open(into))
        ingest(checkpoint, batches, "bench")
        checkpoint.rows.finish()
        counts = checkpoint.counts()
        checkpoint.database.close()
        rows, keyed = counts.rows, counts.requests
    else:
        rows = keyed = 0
        for batch in batches.batches():
            items, requests = keyed_rows(batch, "bench")
            rows += len(items)
            keyed += len(requests)
    seconds = time.perf_counter() - started
    print(json.dumps({"rows": rows, "keyed": keyed, "seconds": seconds}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
