"""One redaction for everything that leaves the process: log events, files, Parquet
metadata, stops kept in the checkpoint, printed lines, published objects, tracebacks.

A `Redactor` knows the invocation's secrets (the client secret, every bearer token the
token URL gave, the object store's secret key and session token) and masks each in
every form it travels in:

- raw;
- URL-encoded, by `quote` or `quote_plus` or any mix (`%2B` or `+`, `%2f` or `%2F`);
- JSON-escaped (`\\"`, `\\/`, `\\\\`, `\\u00e9`);
- as base64 of `id:secret` (HTTP Basic), when the secret's id is given;

and, known or not, any `Bearer <token>` and the password of a URL
(`https://user:pw@proxy` -> `https://user:[redacted]@proxy`).

There is one active redactor in a process (`active`): the command line's entry point
sets it (`logs.configure`), the token cache adds each token it fetches (`hide`), and the
writers of files (`engine/files`), a stop's constructor (`outcome.StopInfo`), the
printed streams (`scrubbed_output`) and the log's processor all read it. This module
imports nothing of batchval: any floor may use it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import sys
from collections.abc import Iterable, Iterator, MutableMapping
from typing import IO, Any

REDACTED = "[redacted]"
# A "secret" shorter than this is not one (a test's token "t"): masking it would mangle
# every output it touches. Real client secrets and tokens are tens of characters long.
MIN_SECRET_CHARS = 4

_SENSITIVE_KEYS = re.compile(r"secret|token|authorization|password", re.IGNORECASE)
# `Bearer x`, `Bearer%20x`, `Bearer+x`: whatever follows is a token, known or not.
_BEARER = re.compile(r"(?i)\bbearer(?:\s|%20|\+)+[A-Za-z0-9._~+/=%-]+")
# The password of a URL's user information: up to the `@` before the host.
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/?#@:\"'<>]*):[^\s/?#@\"'<>]+@")


def without_password(url: str) -> str:
    """`url` with the password of its user information masked (`user:[redacted]@`)."""
    return _URL_PASSWORD.sub(rf"\1:{REDACTED}@", url)


def _char_forms(char: str) -> list[str]:
    """Every way one character of a secret is written, as regular expressions: JSON's
    escapes first (so that a match never stops inside one), then percent-encoding of
    its UTF-8 bytes (hex in either case), `+` for a space, and the character itself."""
    forms: list[str] = []
    for escaped in (json.dumps(char)[1:-1], json.dumps(char, ensure_ascii=False)[1:-1]):
        if escaped != char:
            forms.append(re.escape(escaped))
    if char == "/":
        forms.append(re.escape("\\/"))
    percent = "".join(
        "%" + "".join(f"[{h.lower()}{h}]" if h.isalpha() else h for h in f"{byte:02X}")
        for byte in char.encode()
    )
    forms.append(percent)
    if char == " ":
        forms.append(r"\+")
    forms.append(re.escape(char))
    return list(dict.fromkeys(forms))


def _pattern_of(secret: str) -> str:
    """A regular expression that matches `secret` in every form of this module's list."""
    return "".join(f"(?:{'|'.join(_char_forms(char))})" for char in secret)


class Redactor:
    """Masks known secrets in every form they travel in, any bearer token and a URL's
    password; as a structlog processor, also the values of sensitive-looking keys."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._known: list[str] = []
        self._pattern: re.Pattern[str] | None = None
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str, *, user: str | None = None) -> None:
        """Mask `secret` from now on; with `user`, also the HTTP Basic form of the two."""
        found = [secret]
        if user is not None and secret:
            basic = base64.b64encode(f"{user}:{secret}".encode()).decode()
            found += [basic, basic.rstrip("=")]
        for text in found:
            if len(text) >= MIN_SECRET_CHARS and text not in self._known:
                self._known.append(text)
                self._pattern = None

    @property
    def secrets(self) -> tuple[str, ...]:
        """The texts masked (each in all its forms)."""
        return tuple(self._known)

    def _compiled(self) -> re.Pattern[str] | None:
        if self._pattern is None and self._known:
            # The longest first: a secret that holds another is masked whole.
            ordered = sorted(self._known, key=len, reverse=True)
            self._pattern = re.compile("|".join(_pattern_of(s) for s in ordered))
        return self._pattern

    def scrub(self, text: str) -> str:
        """`text` with every secret, bearer token and URL password masked."""
        pattern = self._compiled()
        if pattern is not None:
            text = pattern.sub(REDACTED, text)
        text = without_password(text)
        return _BEARER.sub(f"Bearer {REDACTED}", text)

    def scrub_data(self, value: Any) -> Any:
        """JSON-like `value` with every string in it (keys too) scrubbed."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {self.scrub_data(k): self.scrub_data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub_data(v) for v in value]
        return value

    def __call__(
        self, _logger: Any, _method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        """structlog's processor: every event scrubbed before any output."""
        for key, value in list(event.items()):
            if _SENSITIVE_KEYS.search(key) and key != "event":
                event[key] = REDACTED
            elif isinstance(value, str):
                event[key] = self.scrub(value)
            elif not isinstance(value, int | float | bool | type(None)):
                event[key] = self.scrub(str(value))
        return event


_ACTIVE = Redactor()


def active() -> Redactor:
    """The process's redactor: the last the entry point set (`use`)."""
    return _ACTIVE


def use(redactor: Redactor) -> None:
    """Make `redactor` the process's (the command line's entry point, once)."""
    global _ACTIVE
    _ACTIVE = redactor


def hide(secret: str, *, user: str | None = None) -> None:
    """Mask `secret` (a token just fetched) everywhere from now on."""
    _ACTIVE.add(secret, user=user)


def scrub(text: str) -> str:
    """`text` scrubbed by the process's redactor."""
    return _ACTIVE.scrub(text)


def scrub_data(value: Any) -> Any:
    """JSON-like `value` scrubbed by the process's redactor."""
    return _ACTIVE.scrub_data(value)


class _ScrubbingStream:
    """A text stream that scrubs what is written before the stream it stands for sees
    it; everything else (isatty, encoding, fileno, buffer) is that stream's."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click asks whether a stream is binary this way
            raise TypeError("a text stream")
        self._stream.write(scrub(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def scrubbed_output() -> Iterator[None]:
    """While the block runs, stdout and stderr are scrubbed by the process's redactor:
    every printed line (a summary, `batchval: ...`, `status`), whoever prints it."""
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, _ScrubbingStream):
        sys.stdout = _ScrubbingStream(sys.stdout)
    if not isinstance(sys.stderr, _ScrubbingStream):
        sys.stderr = _ScrubbingStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
