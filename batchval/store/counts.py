"""`Counts`: where every input row of a run stands, read from the checkpoint's indexes
(`Checkpoint.counts`) and shown in summary.json and by `status`."""

from __future__ import annotations

import dataclasses


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
