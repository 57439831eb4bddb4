"""The mode of a DIR's answers (test or live), which every product keeps the same way:
the first answer sets it, and an answer of the other mode stops the run (`mode_mixed`),
since one DIR never mixes fake and real figures. A `--live` run against batchval's sandbox
started with --rehearsal holds `rehearsal` (money/live), whose answers look live. And
`UNREADABLE`, the problem type of an answer that was received (and may have been paid
for) but cannot be read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

UNREADABLE = "unreadable-answer"


def answer_mode(data: Mapping[str, Any]) -> str:
    """`test` when the answer says so (test mode only), else `live`."""
    return "test" if data.get("mode") == "test" else "live"


def mixed_with(kept: str, mode: str) -> bool:
    """Whether an answer of `mode` mixes with a DIR holding `kept` (a rehearsal's answers
    look live: they agree)."""
    return kept != mode and (kept, mode) != ("rehearsal", "live")


class ModeHolder(Protocol):
    """Where a DIR keeps the mode of its answers (the checkpoint, the street store)."""

    def get(self, name: str) -> str | None: ...

    def set(self, name: str, value: str) -> None: ...


def mixed_mode(held: ModeHolder, data: Mapping[str, Any], what: str) -> str | None:
    """The DIR's mode comes from its answers: the first sets it. An answer of the other
    mode gives the detail of the `mode_mixed` stop (None when it agrees); `what` names
    the DIR's answers ("answers", "street analyses")."""
    mode, kept = answer_mode(data), held.get("mode")
    if kept is None:
        held.set("mode", mode)
        return None
    if not mixed_with(kept, mode):
        return None
    if kept == "live" and mode == "test":
        return (
            f"this DIR is live (its {what}, or --live) and the API answered in test mode "
            "(test credentials): one DIR never mixes them; give the live client id and "
            "secret, or use a new --out DIR without --live for a trial"
        )
    return (
        f"this DIR holds {kept}-mode {what} and the API answered in {mode} mode; "
        "one DIR never mixes them: use a new --out DIR for these credentials"
    )
