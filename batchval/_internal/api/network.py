"""Why a call got no answer, read from the network's own errors, and which hosts answered.

An HTTP library raises one type for a host name that does not exist, a port where
nothing listens and a certificate it cannot verify (`httpx.ConnectError`); what tells
them apart is what it was raised from: a `socket.gaierror`, a `ConnectionRefusedError`,
an `ssl.SSLError`. `diagnose` follows an error's causes down to them and names the
failure (`NoAnswer`); `errors.read_no_answer` says what each one means for the caller.

`Reach` is the other input of that reading: the host names that have answered, as a
DIR remembers them (`store/checkpoint`). A name the resolver says does not exist is a
wrong address while nothing was ever reached there (a typo, which a scheduler would
otherwise retry for ever); once the host has answered, the same failure is an outage of
DNS, which happens to working configurations.
"""

from __future__ import annotations

import dataclasses
import enum
import errno
import re
import socket
import ssl
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import httpx

_E = TypeVar("_E", bound=BaseException)


class NoAnswer(enum.Enum):
    """Why a call got no answer."""

    NO_SUCH_NAME = "no such name"  # the resolver says the host name does not exist
    NAME_LOOKUP = "name lookup failed"  # the resolver cannot say now (EAI_AGAIN, ...)
    REFUSED = "connection refused"  # the host is there; nothing listens at the port
    TLS = "TLS failed"  # the handshake: a certificate, a host name, not TLS at all
    TIMEOUT = "timed out"  # no connection, or no answer, in time
    CUT = "connection cut"  # reset, or closed before the whole answer came
    OTHER = "connection failed"  # the network's own (unreachable), a proxy's


@dataclasses.dataclass(frozen=True, slots=True)
class Diagnosis:
    kind: NoAnswer
    detail: str  # the resolver's words, OpenSSL's reason, the operating system's message


class Reach:
    """The host names that have answered (any HTTP answer at all), and the hook that
    remembers a new one (the DIR's checkpoint)."""

    def __init__(
        self, hosts: Iterable[str] = (), on_new: Callable[[str], None] | None = None
    ) -> None:
        self._hosts = {host.lower() for host in hosts}
        self._on_new = on_new

    def __contains__(self, host: object) -> bool:
        return isinstance(host, str) and host.lower() in self._hosts

    def note(self, host: str) -> None:
        """`host` answered. Called on every answer: a set lookup once it is known."""
        if host in self._hosts:
            return
        self._hosts.add(host.lower())
        if self._on_new is not None:
            self._on_new(host.lower())


def host_of(url: str | httpx.URL) -> str:
    """A URL's host name as `Reach` keeps it (lower case, IDNA decoded)."""
    return (url if isinstance(url, httpx.URL) else httpx.URL(url)).host


def port_of(url: str) -> str:
    """`host:port` of a URL, the scheme's port when it names none."""
    parsed = httpx.URL(url)
    return f"{parsed.host}:{parsed.port or (443 if parsed.scheme == 'https' else 80)}"


def diagnose(error: BaseException) -> Diagnosis:
    """Why `error` (an HTTP library's, raised for a call that got no answer) happened: the
    first of these found among its causes, in this order: the resolver's error (no such
    name, or another), TLS, a refused connection, a timeout, a cut connection; otherwise
    the deepest cause's message."""
    causes = list(_causes(error))
    lookup = _first(causes, socket.gaierror)
    if lookup is not None:
        said = lookup.strerror or str(lookup)
        if lookup.errno == socket.EAI_NONAME:
            return Diagnosis(NoAnswer.NO_SUCH_NAME, said)
        return Diagnosis(NoAnswer.NAME_LOOKUP, said)
    tls = _first(causes, ssl.SSLError)
    if tls is not None:
        return Diagnosis(NoAnswer.TLS, _tls_reason(tls))
    if any(_refused(cause) for cause in causes):
        return Diagnosis(NoAnswer.REFUSED, "")
    if any(isinstance(cause, TimeoutError | httpx.TimeoutException) for cause in causes):
        connecting = any(isinstance(cause, httpx.ConnectTimeout) for cause in causes)
        return Diagnosis(
            NoAnswer.TIMEOUT, "no connection in time" if connecting else "no answer in time"
        )
    deepest = causes[-1]
    said = str(deepest) or type(deepest).__name__
    if any(isinstance(cause, _CUT) for cause in causes):
        return Diagnosis(NoAnswer.CUT, said)
    return Diagnosis(NoAnswer.OTHER, said)


# A connection that was open and is not any more.
_CUT = (
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
)
# Python 3.11's asyncio joins the errors of every address it tried into one message
# ("Multiple exceptions: [Errno 111] Connect call failed ..., [Errno 99] ..."), keeping
# neither the exceptions nor an errno; 3.12's `all_errors` would keep them.
_ERRNO_IN_TEXT = re.compile(r"\[Errno (-?\d+)\]")


def _causes(error: BaseException) -> Iterator[BaseException]:
    """`error`, then what caused it, depth first through exception groups: the library's
    wrapper first, the operating system's error last. A suppressed `__context__` is
    followed too: httpcore's pool re-raises its `ConnectError` `from None`, which hides
    the `gaierror` or `ConnectionRefusedError` it was raised from."""
    seen: set[int] = set()
    stack = [error]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        nested: list[BaseException] = []
        if isinstance(current, BaseExceptionGroup):
            nested.extend(current.exceptions)
        if current.__cause__ is not None:
            nested.append(current.__cause__)
        elif current.__context__ is not None:
            nested.append(current.__context__)
        stack.extend(reversed(nested))


def _first(causes: list[BaseException], kind: type[_E]) -> _E | None:
    return next((cause for cause in causes if isinstance(cause, kind)), None)


def _refused(cause: BaseException) -> bool:
    if isinstance(cause, ConnectionRefusedError):
        return True
    if not isinstance(cause, OSError):
        return False
    if cause.errno is not None:
        return cause.errno == errno.ECONNREFUSED
    return str(errno.ECONNREFUSED) in _ERRNO_IN_TEXT.findall(str(cause))


def _tls_reason(error: ssl.SSLError) -> str:
    """Why the handshake failed, as OpenSSL says it: `certificate verify failed: self-signed
    certificate`, `... Hostname mismatch, ...`, `wrong version number` (not TLS at all)."""
    if isinstance(error, ssl.SSLCertVerificationError) and error.verify_message:
        return f"certificate verify failed: {error.verify_message.rstrip('.')}"
    if error.reason:
        return error.reason.lower().replace("_", " ")
    return str(error) or type(error).__name__
