"""What a failed call of the object store means (`Failure.of` an obstore exception): its
kind, which decides whether it is read back, tried again or final, and a description of it
that holds no secret, for the messages (`objects.ObjectStore`)."""

from __future__ import annotations

import dataclasses
import re
from typing import Literal

from obstore.exceptions import (
    AlreadyExistsError,
    NotSupportedError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
    UnknownConfigurationKeyError,
)

Kind = Literal[
    "lost",
    "conflict",
    "missing",
    "refused",
    "credentials",
    "unknown",
    "no_bucket",
    "region",
    "redirect",
]
_STATUS = re.compile(r"status(?: code)?: (\d{3})")
CODE = re.compile(r"<Code>([A-Za-z]{1,64})</Code>")
# The region an AuthorizationHeaderMalformed answer expects (S3 names it in `<Region>`): a
# word of the store's own, kept to a region's letters before it is shown.
_REGION = re.compile(r"<Region>([a-z0-9-]{1,32})</Region>")
# obstore's words for a 301 without a Location (S3's PermanentRedirect to another region's
# endpoint): its error has no status to read.
_REDIRECT = ("BareRedirect", "redirect without LOCATION")
# The error codes that say the other writer won (S3 answers a lost create with 412, Azure
# with 409 BlobAlreadyExists; a lost replace is 412 for both): not a conflict to retry.
_LOST = ("BlobAlreadyExists", "ConditionNotMet", "PreconditionFailed")


@dataclasses.dataclass(frozen=True, slots=True)
class Failure:
    """What an obstore exception means, and a description of it that holds no secret."""

    kind: Kind
    reason: str  # for "region": the region the store expects, when it says one
    status: int | None = None

    @property
    def final(self) -> bool:
        """The store will not do this however often it is asked: no read-back, no retry."""
        return self.kind in ("refused", "credentials", "no_bucket", "region", "redirect")

    @classmethod
    def of(cls, exc: Exception) -> Failure:
        found = _STATUS.search(str(exc))
        status = int(found.group(1)) if found else None
        return dataclasses.replace(cls._of(exc, status), status=status)

    @classmethod
    def _of(cls, exc: Exception, status: int | None) -> Failure:
        text = str(exc)
        code = CODE.search(text)
        said = f"HTTP {status}" if status else type(exc).__name__
        said += f" {code.group(1)}" if code else ""
        if isinstance(exc, AlreadyExistsError | PreconditionError):
            # S3's 409 ConditionalRequestConflict: a concurrent write or delete won the race
            # to the key; nothing of ours landed, so the write may be tried again.
            lost = status != 409 or (code is not None and code.group(1) in _LOST)
            return cls("lost" if lost else "conflict", said)
        if code and code.group(1) in ("NoSuchBucket", "ContainerNotFound"):
            return cls("no_bucket", said)
        if code and code.group(1) == "AuthorizationHeaderMalformed":
            region = _REGION.search(text)
            return cls("region", region.group(1) if region else "")
        if any(words in text for words in _REDIRECT):
            return cls("redirect", "no Location")  # obstore gives no status for it
        if (status is not None and 300 <= status < 400) or (code and "Redirect" in code.group(1)):
            return cls("redirect", said)  # a write's, which obstore does not follow
        if isinstance(exc, FileNotFoundError):
            return cls("missing", said)
        if isinstance(exc, PermissionDeniedError | UnauthenticatedError):
            return cls("credentials", f"credentials refused ({said})")
        if isinstance(exc, NotSupportedError | NotImplementedError):
            return cls("refused", f"the store does not support this ({type(exc).__name__})")
        if isinstance(exc, UnknownConfigurationKeyError):
            return cls("refused", "unknown configuration key")
        if status == 409:
            return cls("conflict", said)
        if status == 404 and (not code or code.group(1) in ("NoSuchKey", "BlobNotFound")):
            return cls("missing", said)  # AWS: If-Match on no object is 404 NoSuchKey
        if (
            status is not None
            and (400 <= status < 500 or status == 501)
            and status not in (408, 429)
        ):
            return cls("refused", said)
        if status is not None:
            return cls("unknown", said)
        if "ConnectionRefused" in text or "Connection refused" in text:
            return cls("unknown", "connection refused")
        # No status: words from obstore's description of the cause, for the message only.
        if "kind: Timeout" in text or "TimedOut" in text:
            return cls("unknown", "timed out")
        return cls("unknown", f"no answer ({type(exc).__name__}: no HTTP status)")
