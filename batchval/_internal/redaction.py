"""One redaction for everything that leaves the process: log events, files, Parquet
metadata, stops kept in the checkpoint, printed lines, published objects, tracebacks.

A `Redactor` knows the invocation's secrets (the client secret, every bearer token the
token URL gave, the object store's secret key and session token) and masks each in
every form it travels in:

- raw, in any letter case, and split by up to two white spaces (a tab, a line break);
- URL-encoded, by `quote` or `quote_plus` or any mix (`%2B` or `+`, `%2f` or `%2F`), once
  or more (`%252B`);
- JSON-escaped (`\\"`, `\\/`, `\\\\`, `\\u00e9`, or every character as `\\u0041`);
- as HTML character references (`&#43;`, `&#x2b;`, `&plus;`);
- as hex of its UTF-8 bytes, and as base64 (standard or URL-safe) at each of the three
  alignments it can have inside a longer text (`Bearer <token>` base64'd, the HTTP Basic
  `id:secret`): the characters that hold only the secret's bits are masked;

and, known or not, any `Bearer <token>` and the password of a URL
(`https://user:pw@proxy` -> `https://user:[redacted]@proxy`).

Matching every form of every secret costs a regular expression far slower than the
texts it reads, so a text is first looked at in one canonical form (its percent, HTML
and JSON escapes decoded, lower case, without white space, `+` or `-`): only a text
whose canonical form holds a secret's is matched (`holds`). A text that still holds one
after the masking (a form none of the above) is masked whole.

For the text of an answer that is not understood (a problem's `title` and `detail`, a
page's excerpt), `scrub_parts` masks a secret split across two fields, `holds_part`
finds any 12 characters of one, and `mask_random` masks long runs that look random: a
token no one told the redactor of.

There is one active redactor in a process (`active`): the command line's entry point
sets it (`logs.configure`), the token cache adds each token it fetches (`hide`), and the
writers of files (`place/files`), a stop's constructor (`outcome.StopInfo`), the
printed streams (`scrubbed_output`) and the log's processor all read it. This module
imports nothing of batchval: any floor may use it.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import html
import html.entities
import math
import re
import sys
import urllib.parse
from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from typing import IO, Any

REDACTED = "[redacted]"
# A "secret" shorter than this is not one (a test's token "t"): masking it would mangle
# every output it touches. Real client secrets and tokens are tens of characters long.
MIN_SECRET_CHARS = 4
# Hex and base64 of a secret are masked only from this many bytes: the core of a shorter
# one could be any few letters of a legitimate text.
MIN_ENCODED_BYTES = 12
# How many characters of a secret, in a row, `holds_part` takes for the secret.
PART_CHARS = 12

_SENSITIVE_KEYS = re.compile(r"secret|token|authorization|password", re.IGNORECASE)
# `Bearer x`, `Bearer%20x`, `Bearer+x`: whatever follows is a token, known or not.
_BEARER = re.compile(r"(?i)\bbearer(?:\s|%20|\+)+[A-Za-z0-9._~+/=%-]+")
# The password of a URL's user information: up to the `@` before the host.
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/?#@:\"'<>]*):[^\s/?#@\"'<>]+@")
# Joins the parts of one answer for `scrub_parts`: never in a part, allowed in a gap.
_SEPARATOR = "\x1f"
# What may stand between two characters of a secret: up to two white spaces, each raw,
# JSON-escaped or percent-encoded, or the separator of parts.
_GAP = r"(?:\s|\x1f|\\[tnr]|%(?:25)*(?:09|0a|0d|20)){0,2}"
# The canonical form deletes these (white space, and `+`/`-`, which stand for a space or
# differ between base64's alphabets) and reads `_` as base64's `/`.
_CANONICAL = str.maketrans({c: None for c in " \t\n\r\x0b\x0c\x1f+-"} | {"_": "/"})
_JSON_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")
_JSON_CHARS = {"t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f"}
# A run of the characters tokens are written in (base64, URL-safe, hex, percent).
_RUN = re.compile(r"[A-Za-z0-9+/=_.~%-]{20,}")
RANDOM_BITS = 3.5  # Shannon entropy a character, from which a run looks random


def without_password(url: str) -> str:
    """`url` with the password of its user information masked (`user:[redacted]@`)."""
    if "@" not in url or "://" not in url:  # the expression's own search costs 25 µs a KB
        return url
    return _URL_PASSWORD.sub(rf"\1:{REDACTED}@", url)


def _named_references() -> dict[str, list[str]]:
    """Each character's named HTML references (`+` -> `&plus;`)."""
    named: dict[str, list[str]] = collections.defaultdict(list)
    for name, value in html.entities.html5.items():
        if len(value) == 1 and name.endswith(";"):
            named[value].append("&" + name)
    return named


_NAMED = _named_references()


def _char_forms(char: str) -> list[str]:
    """Every way one character of a secret is written, as regular expressions (matched
    without regard to case): JSON's escapes first (so that a match never stops inside
    one), percent-encoding of its UTF-8 bytes (once or more), `+` for a space, its HTML
    references, and the character itself."""
    forms: list[str] = []
    for escaped in (
        *(f"\\{c}" for c, v in _JSON_CHARS.items() if v == char),
        f"\\{char}" if char in '"\\/' else "",
        f"\\u{ord(char):04x}" if ord(char) < 0x10000 else "",
    ):
        if escaped:
            forms.append(re.escape(escaped))
    forms.append("".join(f"%(?:25)*{byte:02x}" for byte in char.encode()))
    if char == " ":
        forms.append(r"\+")
    forms += [f"&#0*{ord(char)};?", f"&#x0*{ord(char):x};?"]
    forms += [re.escape(name) for name in _NAMED.get(char, ())]
    forms.append(re.escape(char))
    return list(dict.fromkeys(forms))


def _encoded(secret: str) -> list[str]:
    """The hex of `secret`'s bytes, and the characters of its base64 that hold only its
    bits at each of the three alignments it can have inside a longer text."""
    data = secret.encode()
    if len(data) < MIN_ENCODED_BYTES:
        return []
    found = [data.hex()]
    for shift, skip in ((0, 0), (1, 2), (2, 3)):
        encoded = base64.b64encode(bytes(shift) + data).decode().rstrip("=")
        found.append(encoded[skip : len(encoded) - (1 if (shift + len(data)) % 3 else 0)])
    return found


def _base64_char(char: str) -> str:
    if char == "+":
        return r"(?:[+-]|%(?:25)*2b)"
    if char == "/":
        return r"(?:[/_]|%(?:25)*2f|\\/)"
    return re.escape(char)


def _pattern_of(secret: str) -> str:
    """A regular expression that matches `secret` in every form of this module's list."""
    forms = [_GAP.join(f"(?:{'|'.join(_char_forms(char))})" for char in secret)]
    forms += [_GAP.join(map(_base64_char, encoded)) for encoded in _encoded(secret)]
    return "|".join(forms)


def _decoded(text: str) -> str:
    """`text` with its percent, HTML and JSON escapes decoded, layer by layer."""
    for _ in range(6):
        before = text
        if "%" in text:
            text = urllib.parse.unquote(text)
        if "&" in text:
            text = html.unescape(text)
        if "\\" in text:
            text = _JSON_ESCAPE.sub(_unescape, text)
        if text == before:
            break
    return text


def _unescape(match: re.Match[str]) -> str:
    escaped = match.group(1)
    if len(escaped) == 5:
        return chr(int(escaped[1:], 16))
    return _JSON_CHARS.get(escaped, escaped)


def canonical(text: str) -> str:
    """The form every form of a text comes to: escapes decoded, lower case, without white
    space, `+` or `-`, `_` read as `/`."""
    return _decoded(text).lower().translate(_CANONICAL)


def _canonical_forms(secret: str) -> list[str]:
    """`secret`'s canonical form and that of its hex and base64 cores."""
    return [
        canonical(secret),
        *(encoded.lower().translate(_CANONICAL) for encoded in _encoded(secret)),
    ]


def mask_random(text: str) -> str:
    """`text` with each run of 20 or more token characters that looks random (a letter and
    a digit in it, `RANDOM_BITS` of entropy a character) masked: for the words of an
    answer not understood, never for ids, keys or model versions."""

    def masked(match: re.Match[str]) -> str:
        run = match.group(0)
        if not (any(c.isdigit() for c in run) and any(c.isalpha() for c in run)):
            return run
        counts = collections.Counter(run)
        bits = -sum(n / len(run) * math.log2(n / len(run)) for n in counts.values())
        return REDACTED if bits >= RANDOM_BITS else run

    return _RUN.sub(masked, text)


def cut(text: str, limit: int) -> str:
    """`text` on one line, cut to `limit` characters at most, never inside a word: a word
    the cut would break (a secret's first half) is left out whole."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    kept = text[: limit + 1]
    return kept[: kept.rfind(" ")] if " " in kept else ""


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` in order, those that overlap or touch made one."""
    merged: list[tuple[int, int]] = []
    for first, last in sorted(spans):
        if merged and first <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


class Redactor:
    """Masks known secrets in every form they travel in, any bearer token and a URL's
    password; as a structlog processor, also the values of sensitive-looking keys."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._known: list[str] = []
        # Each secret's expression, made the first time a text holds it: one takes 50 to
        # 100 ms to compile, too long to make for every token fetched (the log's next line
        # would wait for it, and the event loop with it).
        self._patterns: dict[str, re.Pattern[str]] = {}
        self._needles: list[tuple[str, str]] = []  # (the middle of a canonical form, secret)
        self._parts: set[str] = set()  # every PART_CHARS run of each canonical form
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
                for form in _canonical_forms(text):
                    # Its middle: a neighbour's escape decoded with its first character
                    # (`%4` + `1...`) cannot hide it.
                    self._needles.append((form[2:-2] if len(form) >= 8 else form, text))
                    self._parts.update(
                        form[i : i + PART_CHARS] for i in range(len(form) - PART_CHARS + 1)
                    )

    @property
    def secrets(self) -> tuple[str, ...]:
        """The texts masked (each in all its forms)."""
        return tuple(self._known)

    @property
    def needles(self) -> tuple[str, ...]:
        """What `holds` looks for in a text's canonical form (`canonical`)."""
        return tuple(needle for needle, _ in self._needles)

    def _held(self, text: str) -> list[str]:
        """The known secrets `text` holds whole, in any form, the longest first (a secret
        that holds another is masked whole)."""
        if not self._needles:
            return []
        seen = canonical(text)
        found = {secret for needle, secret in self._needles if needle in seen}
        return sorted(found, key=len, reverse=True)

    def _pattern(self, secret: str) -> re.Pattern[str]:
        """`secret`'s expression, every form of it (`_pattern_of`), made once."""
        pattern = self._patterns.get(secret)
        if pattern is None:
            pattern = self._patterns[secret] = re.compile(_pattern_of(secret), re.IGNORECASE)
        return pattern

    def holds(self, text: str) -> bool:
        """Whether `text` holds a known secret whole, in any form (its canonical form)."""
        return bool(self._held(text))

    def holds_part(self, text: str) -> bool:
        """Whether `text` holds `PART_CHARS` characters in a row of a known secret, or of
        its hex or base64, in any form: a secret cut short, by the sender or a limit."""
        seen = canonical(text)
        return any(
            seen[i : i + PART_CHARS] in self._parts for i in range(len(seen) - PART_CHARS + 1)
        )

    def _masked(self, text: str) -> str:
        """`text` with every known secret masked; whole if one stays in a form unmatched."""
        held = self._held(text)
        if not held:
            return text
        for secret in held:
            text = self._pattern(secret).sub(REDACTED, text)
        return REDACTED if self.holds(text) else text

    def scrub(self, text: str) -> str:
        """`text` with every secret, bearer token and URL password masked."""
        text = without_password(self._masked(text))
        if "bearer" not in text.lower():
            return text
        return _BEARER.sub(f"Bearer {REDACTED}", text)

    def scrub_parts(self, parts: Sequence[str]) -> list[str]:
        """Each of `parts` (the fields of one answer) scrubbed, a secret split across two
        of them (`title` ends with its start, `detail` begins with the rest) masked in
        each."""
        parts = [part.replace(_SEPARATOR, " ") for part in parts]
        joined = _SEPARATOR.join(parts)
        spans = _merged(
            [
                m.span()
                for secret in self._held(joined)
                for m in self._pattern(secret).finditer(joined)
            ]
        )
        scrubbed: list[str] = []
        start = 0
        for part in parts:
            end, pieces, at = start + len(part), [], start
            for first, last in spans:
                first, last = max(first, start), min(last, end)
                if first < last:
                    pieces += [joined[at:first], REDACTED]
                    at = last
            pieces.append(joined[at:end])
            scrubbed.append(self.scrub("".join(pieces)))
            start = end + 1
        return scrubbed

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


def scrub_parts(parts: Sequence[str]) -> list[str]:
    """The fields of one answer scrubbed by the process's redactor (`Redactor.scrub_parts`)."""
    return _ACTIVE.scrub_parts(parts)


def holds_part(text: str) -> bool:
    """Whether `text` holds a run of a secret the process's redactor knows."""
    return _ACTIVE.holds_part(text)


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
