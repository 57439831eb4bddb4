"""What every command that calls the API shares, written once: which API answers (the
configured one, or the embedded sandbox in test mode), the fingerprint of an input file,
and why an invocation did not complete (`final_stop`).

`run`, `streets` and `verify` put these together with `invocation.locked_dir` (the DIR's
lock and log) and `run/sending.Sending` (the sending phase behind its gates); each
command is left with its own job, outputs and summary lines.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path

import structlog

from batchval.outcome import RunRefusedError, StopInfo, StopReason
from batchval.settings import ApiSettings
from batchval.store.counts import Counts

log = structlog.get_logger()

EmbeddedApi = Callable[[], contextlib.AbstractContextManager[ApiSettings]]


@contextlib.contextmanager
def chosen_api(
    configured: ApiSettings | None, embedded: EmbeddedApi | None, *, event: str, what: str
) -> Iterator[ApiSettings]:
    """The configured API, or else the embedded sandbox (test mode), said loudly: `event`
    is the warning's name, `what` what the command does there ("valuing", ...)."""
    if configured is not None:
        yield configured
        return
    if embedded is None:
        raise RunRefusedError(StopReason.REFUSED, "no API is configured")
    log.warning(
        event,
        message=f"No API configured: {what} against the embedded sandbox in TEST mode. "
        "Figures are fake and carry mode = test.",
    )
    with embedded() as settings:
        yield settings


def file_fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def final_stop(counts: Counts, stop: StopInfo | None, pending: str = "request") -> StopInfo | None:
    """Why a run is not complete (None when it is), for `run` and `streets` alike: every
    incomplete run has a reason, and a complete run still reports a stop a person must
    act on (`StopInfo.needs_a_person`: met while reading back, say), never a resumable
    one. `pending` names what is left (requests, postcodes) in the defect's detail."""
    if counts.complete:
        return stop if stop is not None and stop.needs_a_person else None
    if stop is not None:
        return stop
    return StopInfo(
        StopReason.INTERNAL_ERROR,
        f"{counts.requests_pending} {pending}(s) left pending with no reason recorded "
        "(a defect: please report it); run the same command again to finish them",
    )
