"""How an invocation ends: the exit codes, the stop reasons and the project's error root.

Exit codes are a contract with schedulers (README, Exit codes); the stop reasons are stable
words that `summary.json` (`stop.reason`), `batchval status --json` and the one line on
stderr use, and that scripts may branch on. Each reason maps to exactly one exit code.

    BatchvalError                 every error batchval raises on purpose
    ├── PartnerError              the API's answers (batchval.api.errors, its own tree)
    ├── InputError                the input cannot be used (batchval.input)
    ├── SettingsError             the command line or config cannot be used
    ├── DirLockedError            another run holds DIR (batchval.store.lock)
    ├── CheckpointVersionError    DIR was written by a newer batchval
    └── RunRefusedError           an invocation ends before sending, with its StopReason
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Mapping
from typing import Any


class ExitCode(enum.IntEnum):
    COMPLETE = 0  # every row has a result or a problem
    DIFFERENCES = 1  # verify only: the API's answers and results.parquet differ
    USAGE = 64  # bad command line or config, or the API's address is wrong
    INPUT = 65  # the input cannot be used
    INTERNAL = 70  # a defect: outputs written for what was done, traceback in the log
    RESUMABLE = 75  # run the same command again later
    ACCOUNT = 77  # a person fixes the account, then the same command again


class StopReason(enum.Enum):
    """Why a run stopped before every row had a result or a problem."""

    DAILY_LIMIT = "daily_limit"  # 429 daily_limit: nothing is sent before `not_before`
    API_UNAVAILABLE = "api_unavailable"  # nothing answered, or every call failed, too long
    UNRECOGNISED_ANSWERS = "unrecognised_answers"  # answers the API does not describe
    SIGNAL = "signal"  # SIGTERM or SIGINT
    MAX_CREDITS = "max_credits"  # --max-credits would be exceeded by the next call
    DIR_LOCKED = "dir_locked"  # another batchval process holds DIR
    STORE_UNAVAILABLE = "store_unavailable"  # the object store at the run's URL does not answer
    BOOK_CHANGED = "book_changed"  # another run replaced the --book (at a URL) as this one wrote
    INSUFFICIENT_CREDITS = "insufficient_credits"  # 403 insufficient-credits
    ACCOUNT_BLOCKED = "account_blocked"  # 403 account-blocked
    CREDENTIALS_REFUSED = "credentials_refused"  # the token URL or the API refuses them
    WRONG_ADDRESS = "wrong_address"  # base or auth URL answers as no API would
    MODE_MIXED = "mode_mixed"  # test answers in a live DIR, or the reverse
    INPUT_UNUSABLE = "input_unusable"  # the input file cannot be read
    # Validation refused more than `run.max_refused_share` of the rows: nothing is sent.
    INPUT_MOSTLY_REFUSED = "input_mostly_refused"
    REFUSED = "refused"  # the command line, the config or DIR's run does not fit this call
    INTERNAL_ERROR = "internal_error"  # a defect of batchval's

    @property
    def exit_code(self) -> ExitCode:
        return _EXIT_CODES.get(self, ExitCode.RESUMABLE)


_EXIT_CODES = {
    StopReason.INSUFFICIENT_CREDITS: ExitCode.ACCOUNT,
    StopReason.ACCOUNT_BLOCKED: ExitCode.ACCOUNT,
    StopReason.CREDENTIALS_REFUSED: ExitCode.ACCOUNT,
    StopReason.WRONG_ADDRESS: ExitCode.USAGE,
    StopReason.MODE_MIXED: ExitCode.USAGE,
    StopReason.INPUT_UNUSABLE: ExitCode.INPUT,
    StopReason.INPUT_MOSTLY_REFUSED: ExitCode.INPUT,
    StopReason.REFUSED: ExitCode.USAGE,
    StopReason.INTERNAL_ERROR: ExitCode.INTERNAL,
}


@dataclasses.dataclass(frozen=True, slots=True)
class StopInfo:
    """Why a run did not complete: summary.json's `stop` object."""

    reason: StopReason
    detail: str
    not_before: dt.datetime | None = None  # no call before this (the daily limit)
    status: int | None = None  # the HTTP status that made the run stop, when one did

    @property
    def needs_a_person(self) -> bool:
        """A stop that a complete run still reports (a defect, the account, the address,
        the input): what is left to do is a person's, not a resume's. An input whose every
        row was refused leaves nothing pending, and is still not a success."""
        return self.reason.exit_code in (
            ExitCode.INTERNAL,
            ExitCode.ACCOUNT,
            ExitCode.USAGE,
            ExitCode.INPUT,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason.value,
            "detail": self.detail,
            "not_before": self.not_before.isoformat() if self.not_before else None,
            "status": self.status,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StopInfo:
        not_before = data.get("not_before")
        status = data.get("status")
        return cls(
            reason=StopReason(data["reason"]),
            detail=str(data.get("detail", "")),
            not_before=dt.datetime.fromisoformat(not_before) if not_before else None,
            status=status if isinstance(status, int) else None,
        )

    def line(self) -> str:
        """The one line on stderr."""
        return f"{self.reason.value}: {self.detail}"


class BatchvalError(Exception):
    """The root of every error batchval raises on purpose."""


class SettingsError(BatchvalError, ValueError):
    """The command line or the config cannot be used (exit 64)."""


class RunRefusedError(BatchvalError):
    """The invocation ends before sending: one line for a person, and an exit code.
    Nothing in DIR is written but its log: its outputs stay its last invocation's."""

    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail

    @property
    def exit_code(self) -> ExitCode:
        return self.reason.exit_code
