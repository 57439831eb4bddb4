"""How an invocation ends: the exit codes and the stop reasons, named once.

Exit codes are a contract with schedulers (README, Exit codes); the stop reasons are stable
words that `summary.json` (`stop.reason`), `batchval status --json` and the one line on
stderr use, and that scripts may branch on. Each reason maps to exactly one exit code.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    COMPLETE = 0  # every row has a result or a problem
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
    INSUFFICIENT_CREDITS = "insufficient_credits"  # 403 insufficient-credits
    ACCOUNT_BLOCKED = "account_blocked"  # 403 account-blocked
    CREDENTIALS_REFUSED = "credentials_refused"  # the token URL or the API refuses them
    WRONG_ADDRESS = "wrong_address"  # base or auth URL answers as no API would
    MODE_MIXED = "mode_mixed"  # test answers in a live DIR, or the reverse
    INPUT_UNUSABLE = "input_unusable"  # the input file cannot be read
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
    StopReason.INTERNAL_ERROR: ExitCode.INTERNAL,
}
