"""api/network: why a call got no answer, read from the causes the HTTP library keeps,
and the hosts that have answered. (What each reason means for the caller is in
test_errors, `read_no_answer`; real sockets, TLS and the resolver in test_transport.)"""

from __future__ import annotations

import errno
import socket

import httpx
import pytest

from batchval._internal.api.network import NoAnswer, Reach, diagnose, host_of, port_of


def test_a_cause_hidden_by_from_none_is_still_read() -> None:
    """httpcore's pool re-raises `from None`: the context it hides is still the cause."""
    inner = httpx.ConnectError("[Errno -2] Name or service not known")
    inner.__context__ = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    inner.__suppress_context__ = True
    outer = httpx.ConnectError("outer")
    outer.__cause__ = inner
    assert diagnose(outer).kind is NoAnswer.NO_SUCH_NAME
    assert diagnose(outer).detail == "Name or service not known"


def test_the_resolver_is_read_before_anything_else() -> None:
    """A name lookup that failed is the reason, whatever else the chain holds."""
    group = ExceptionGroup(
        "every attempt failed",
        [
            ConnectionRefusedError(errno.ECONNREFUSED, "refused"),
            socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"),
        ],
    )
    diagnosis = diagnose(group)
    assert diagnosis.kind is NoAnswer.NAME_LOOKUP
    assert diagnosis.detail == "Temporary failure in name resolution"


def test_a_refused_errno_without_the_class_is_refused() -> None:
    """An OSError carrying ECONNREFUSED, not its subclass, still reads as refused."""
    assert diagnose(OSError(errno.ECONNREFUSED, "refused")).kind is NoAnswer.REFUSED
    assert diagnose(OSError(errno.EHOSTUNREACH, "No route to host")).kind is NoAnswer.OTHER


def test_reach_tells_its_hook_of_each_new_host_once() -> None:
    """A host that answers is remembered; the hook hears of it the first time only."""
    heard: list[str] = []
    reach = Reach(["known.example"], on_new=heard.append)
    for host in ("known.example", "api.example", "api.example"):
        reach.note(host)
    assert heard == ["api.example"]
    assert "API.example" in reach
    assert "other.example" not in reach


@pytest.mark.parametrize(
    ("url", "host", "where"),
    [
        ("https://API.Example/partners/v1", "api.example", "api.example:443"),
        ("http://127.0.0.1:8000", "127.0.0.1", "127.0.0.1:8000"),
        ("http://bücher.example/x", "bücher.example", "bücher.example:80"),
    ],
)
def test_hosts_and_ports_of_urls(url: str, host: str, where: str) -> None:
    """The host as Reach keeps it (lower case, IDNA decoded); host:port for messages."""
    assert host_of(url) == host
    assert port_of(url) == where
