"""The reader measured alone, in a process of its own: read, validate and key a file.

    python tests/bench/reader_child.py BOOK [CHECKPOINT_DIR]

It does what `batchval run` does with each input batch (the runner's `_ingest`): every
row's canonical request keyed, rows and requests gathered for the batch's one
transaction; that transaction is written only when a CHECKPOINT_DIR is given (the whole
ingest). Prints one JSON line: rows, rows keyed and the seconds from opening the file
to the last batch (imports excluded; the parent reads the process's peak RSS).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from batchval.ingest import keyed_rows
from batchval.input import InputOptions, open_input
from batchval.store.checkpoint import Checkpoint


def main(source: Path, into: Path | None) -> None:
    started = time.perf_counter()
    checkpoint = None if into is None else Checkpoint.open(into)
    rows = keyed = 0
    for batch in open_input(source, InputOptions()).batches():
        items, requests = keyed_rows(batch, "bench")
        if checkpoint is not None:
            checkpoint.add_rows(items, requests, batch.passthrough)
        rows += len(items)
        keyed += len(requests)
    if checkpoint is not None:
        checkpoint.finish_ingest()
        checkpoint.close()
    seconds = time.perf_counter() - started
    print(json.dumps({"rows": rows, "keyed": keyed, "seconds": seconds}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
