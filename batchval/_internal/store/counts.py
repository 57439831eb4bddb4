"""`Counts`: where every input row of a run stands, read from the checkpoint's indexes
(`Checkpoint.counts`, `StreetStore.counts`) and shown in summary.json and by `status`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from batchval._internal.store.queue import PENDING_STATES, StateTally


@dataclasses.dataclass(frozen=True, slots=True)
class Counts:
    """Where every input row stands, and the distinct requests behind them."""

    rows: int
    input_problems: int
    valued_rows: int
    api_problem_rows: int
    pending_rows: int
    requests: int
    requests_done: int
    requests_problem: int
    requests_pending: int
    credits: int
    duplicate_rows: int = 0  # rows whose request an earlier row already asks for

    @classmethod
    def of_tally(
        cls, rows: int, refused: int, tally: Mapping[str, StateTally], credits: int
    ) -> Counts:
        """The counts of a product: its input rows, those refused, its queue's tally by
        state (`WorkQueue.tally`) and the credits it was charged."""

        def of(*states: str) -> tuple[int, int]:
            """(items, rows asking for them) in `states`."""
            found = [tally[state] for state in states if state in tally]
            return sum(t.items for t in found), sum(t.rows for t in found)

        done, done_rows = of("done")
        problems, problem_rows = of("problem")
        pending, pending_rows = of(*PENDING_STATES)
        return cls(
            rows=rows,
            input_problems=refused,
            valued_rows=done_rows,
            api_problem_rows=problem_rows,
            pending_rows=pending_rows,
            requests=sum(t.items for t in tally.values()),
            requests_done=done,
            requests_problem=problems,
            requests_pending=pending,
            credits=credits,
            # Rows after the first asking for an item: sent once, charged once.
            duplicate_rows=sum(t.rows - t.asked for t in tally.values()),
        )

    @property
    def complete(self) -> bool:
        return self.pending_rows == 0

    def as_json(self) -> dict[str, dict[str, int]]:
        """The `rows` and `requests` parts of summary.json and of `status`."""
        return {
            "rows": {
                "total": self.rows,
                "valued": self.valued_rows,
                "problems": self.input_problems + self.api_problem_rows,
                "pending": self.pending_rows,
                # Identical requests are sent once and charged once; these rows share.
                "duplicates": self.duplicate_rows,
            },
            "requests": {
                "unique": self.requests,
                "valued": self.requests_done,
                "problems": self.requests_problem,
                "pending": self.requests_pending,
            },
        }
