"""How an invocation ends: the exit codes, the stop reasons and the project's error root.

Exit codes are a contract with schedulers (docs/reference/exit-codes.md is drawn from the
meanings here); the stop reasons are stable words that `summary.json` (`stop.reason`),
`batchval status --json` and the one line on stderr use, and that scripts may branch on.
Each reason maps to exactly one exit code.

    BatchvalError                 every error batchval raises on purpose
    ├── PartnerError              the API's answers (batchval._internal.api.errors, its own tree)
    ├── InputError                the input cannot be used (batchval._internal.input)
    ├── SettingsError             the command line or config cannot be used
    ├── DirLockedError            another run holds DIR (batchval._internal.store.lock)
    ├── CheckpointVersionError    DIR was written by a newer batchval
    └── RunRefusedError           an invocation ends before sending, with its StopReason
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Mapping
from typing import Any

from batchval._internal import redaction


class ExitCode(enum.IntEnum):
    COMPLETE = 0
    DIFFERENCES = 1
    USAGE = 64
    INPUT = 65
    INTERNAL = 70
    RESUMABLE = 75
    ACCOUNT = 77

    @property
    def meaning(self) -> str:
        return _CODES[self][0]

    @property
    def then(self) -> str:
        """What a scheduler, or a person, does next."""
        return _CODES[self][1]


# Each code's meaning and what follows it: the reference's table (docs/hooks.py) is drawn
# from here.
_CODES: Mapping[ExitCode, tuple[str, str]] = {
    ExitCode.COMPLETE: ("complete: every row has a result or a problem", "nothing"),
    ExitCode.DIFFERENCES: (
        "`verify` only: the API's answers and results.parquet differ (`DIR/verify.parquet`)",
        "a person looks at the differences",
    ),
    ExitCode.USAGE: (
        "bad command line or config, DIR holds a different run, the API's address is wrong, "
        "or `--live` without a live API",
        "a person fixes the call",
    ),
    ExitCode.INPUT: (
        "the input cannot be used: unreadable, no data rows, duplicate or missing required "
        "columns, or more than `run.max_refused_share` of the rows refused (nothing is sent)",
        "a person fixes the input or its mapping",
    ),
    ExitCode.INTERNAL: (
        "a defect of batchval's: outputs written for what was done, the traceback in "
        "`DIR/batchval.log` (or, for a command without a DIR log, a `batchval-*.traceback` "
        "file the line names)",
        "a person reports it; the same command resumes",
    ),
    ExitCode.RESUMABLE: (
        "incomplete but resumable: the daily limit, an API or store that does not answer, "
        "answers the API does not give, a signal, `--max-credits`, another run holding DIR",
        "run the same command again later (after `stop.not_before` when given)",
    ),
    ExitCode.ACCOUNT: (
        "the account cannot spend: insufficient credits, account blocked, credentials refused",
        "a person fixes the account, then the same command again",
    ),
}


class StopReason(enum.Enum):
    """Why a run stopped before every row had a result or a problem."""

    DAILY_LIMIT = "daily_limit"
    API_UNAVAILABLE = "api_unavailable"
    UNRECOGNISED_ANSWERS = "unrecognised_answers"
    SIGNAL = "signal"
    MAX_CREDITS = "max_credits"
    DIR_LOCKED = "dir_locked"
    STORE_UNAVAILABLE = "store_unavailable"
    STORE_MISSING = "store_missing"
    STORE_CREDENTIALS = "store_credentials"
    STORE_KEY_MALFORMED = "store_key_malformed"
    BOOK_CHANGED = "book_changed"
    INSUFFICIENT_CREDITS = "insufficient_credits"
    ACCOUNT_BLOCKED = "account_blocked"
    CREDENTIALS_REFUSED = "credentials_refused"
    WRONG_ADDRESS = "wrong_address"
    MODE_MIXED = "mode_mixed"
    INPUT_UNUSABLE = "input_unusable"
    INPUT_MOSTLY_REFUSED = "input_mostly_refused"
    REFUSED = "refused"
    INTERNAL_ERROR = "internal_error"

    @property
    def exit_code(self) -> ExitCode:
        return _EXIT_CODES.get(self, ExitCode.RESUMABLE)

    @property
    def when(self) -> str:
        return _WHEN[self]


# When each reason is given: the reference's table (docs/hooks.py) is drawn from here.
_WHEN: Mapping[StopReason, str] = {
    StopReason.DAILY_LIMIT: (
        "429 `daily_limit`: `not_before` is the API's midnight, read from its `Retry-After`; "
        "a run again before then sends nothing"
    ),
    StopReason.API_UNAVAILABLE: (
        "nothing answers, or only transient failures (502, 503, 504, cut connections, "
        "timeouts) for `run.outage_seconds`, or requests still failing after "
        "`run.max_attempts`; when no answer came, `detail` says why"
    ),
    StopReason.UNRECOGNISED_ANSWERS: (
        "`run.unrecognised_limit` answers the API does not give (an HTML page from a proxy, "
        "an unknown status or problem type); `detail` quotes the last one"
    ),
    StopReason.SIGNAL: "SIGTERM or SIGINT",
    StopReason.MAX_CREDITS: "the next call could pass `--max-credits`",
    StopReason.DIR_LOCKED: (
        "another batchval process holds DIR (stderr only: DIR's outputs are that run's); at a "
        "URL, another process holds the run's lease, or this one no longer surely holds it"
    ),
    StopReason.STORE_UNAVAILABLE: (
        "the object store at the run's URL does not answer; nothing more is sent, and the "
        "same command later resumes from what the URL keeps; or an index file at an "
        "`https://` URL could not be downloaded (no answer, an HTTP error status), before "
        "any call"
    ),
    StopReason.STORE_MISSING: (
        "the bucket or container of the run's URL (or of an input, a book or an index file "
        "there) does not exist; `detail` names it. Before anything is sent"
    ),
    StopReason.STORE_CREDENTIALS: (
        "the object store refuses the credentials it was given (or refuses them a write); "
        "`detail` names the store and its answer. Before anything is sent, or mid-run"
    ),
    StopReason.STORE_KEY_MALFORMED: (
        "the Azure storage account key cannot be one (not base64, or not its 64 bytes: cut "
        "short when copied?); `detail` names the setting that holds it, never the key"
    ),
    StopReason.BOOK_CHANGED: (
        "another run replaced the `--book` kept at a URL between this run's reading and "
        "writing it; the valuations are in DIR, and the same command merges them"
    ),
    StopReason.INSUFFICIENT_CREDITS: "403 `insufficient-credits`",
    StopReason.ACCOUNT_BLOCKED: "403 `account-blocked`",
    StopReason.CREDENTIALS_REFUSED: (
        "the token URL refuses the client id and secret, or the API refuses fresh tokens "
        "again and again"
    ),
    StopReason.WRONG_ADDRESS: (
        "404 or 405 to `POST /valuations` or from the token URL, the first answers all "
        "something other than the API's, or a host name that does not exist and that DIR "
        "has never reached; `detail` names the URL or host"
    ),
    StopReason.MODE_MIXED: "an answer of the other mode (test or live) than DIR's",
    StopReason.INPUT_UNUSABLE: (
        "the input file cannot be read, or an index file cannot be used or is not the one "
        "its sha256 (`index.sha256`) names"
    ),
    StopReason.INPUT_MOSTLY_REFUSED: (
        "validation refused more than `run.max_refused_share` of the rows (0.5 by default), "
        "decided before any call, so nothing is sent; `detail` names the commonest problems "
        "and the fix"
    ),
    StopReason.REFUSED: (
        "the command line or config does not fit: DIR holds a run of another input, "
        "settings or run id, or a checkpoint of a newer batchval; or `input.passthrough` "
        "lists a column the input does not have; or `--live` (`run.live`) with no API "
        "configured or with test credentials (nothing is sent); or the run's store will not "
        "do what the run needs (no such bucket, another region, a prefix with `..`, `.` or "
        "an empty segment, refused credentials or writes, a redirect, no conditional "
        "writes); or the run's memory vanished while an invocation held it (DIR's "
        "checkpoint deleted or replaced; at a URL, its bucket, its HEAD or its log "
        "deleted): nothing more is sent, and the same command would start a new run"
    ),
    StopReason.INTERNAL_ERROR: (
        "a defect of batchval's (a checkpoint that cannot be read, a key the API says was "
        "reused with another body)"
    ),
}


_EXIT_CODES = {
    StopReason.INSUFFICIENT_CREDITS: ExitCode.ACCOUNT,
    StopReason.ACCOUNT_BLOCKED: ExitCode.ACCOUNT,
    StopReason.CREDENTIALS_REFUSED: ExitCode.ACCOUNT,
    StopReason.WRONG_ADDRESS: ExitCode.USAGE,
    StopReason.MODE_MIXED: ExitCode.USAGE,
    StopReason.INPUT_UNUSABLE: ExitCode.INPUT,
    StopReason.INPUT_MOSTLY_REFUSED: ExitCode.INPUT,
    StopReason.REFUSED: ExitCode.USAGE,
    StopReason.STORE_MISSING: ExitCode.USAGE,
    StopReason.STORE_CREDENTIALS: ExitCode.USAGE,
    StopReason.STORE_KEY_MALFORMED: ExitCode.USAGE,
    StopReason.INTERNAL_ERROR: ExitCode.INTERNAL,
}


@dataclasses.dataclass(frozen=True, slots=True)
class StopInfo:
    """Why a run did not complete: summary.json's `stop` object."""

    reason: StopReason
    detail: str
    not_before: dt.datetime | None = None  # no call before this (the daily limit)
    status: int | None = None  # the HTTP status that made the run stop, when one did

    def __post_init__(self) -> None:
        # The one door of every stop's detail: scrubbed here, it is scrubbed in the
        # checkpoint, summary.json, the terminal and the published objects alike.
        object.__setattr__(self, "detail", redaction.scrub(self.detail))

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
    """The root of every error batchval raises on purpose. Each one pickles (to a process
    pool's parent, joblib, Dask) and comes back its own type with its attributes, however
    its constructor is shaped."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), self.args, self.__dict__))


def _rebuilt(
    kind: type[BatchvalError], args: tuple[Any, ...], state: dict[str, Any]
) -> BatchvalError:
    """An unpickled error: its type, its message (`args`) and its attributes, without
    calling its constructor again (whose parameters are not its `args`)."""
    error = kind.__new__(kind)
    BaseException.__init__(error, *args)
    error.__dict__.update(state)
    return error


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
