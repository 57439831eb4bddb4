"""The sandbox in your own tests, and the client batchval itself uses.

    from batchval.testing import Sandbox

    with Sandbox() as sandbox:                     # `batchval sandbox` on a free port
        sandbox.base_url, sandbox.auth_url           # where the API and its token are
        batchval.run("book.csv", out=...)            # with sandbox.env() in os.environ
        sandbox.control("ledger")                    # the sandbox's controls

    # conftest.py: a fresh sandbox for each test that asks for `batchval_sandbox`
    pytest_plugins = ["batchval.testing"]

`Sandbox` starts `batchval sandbox --port 0` as a process of its own (this Python's
batchval, whatever is on PATH) with the options given, reads its ready line, and stops it
when the block ends. `PartnerClient` is the small async client batchval itself uses, with
its `Credentials` and `ValuationRequest`; its errors are in `batchval.exceptions`.
docs/how-to/sandbox-in-tests.md shows both at work.
"""

from batchval._internal.api import Credentials, PartnerClient, ValuationRequest
from batchval._internal.sandbox import SECRETS, Sandbox, batchval_sandbox

__all__ = [
    "SECRETS",
    "Credentials",
    "PartnerClient",
    "Sandbox",
    "ValuationRequest",
    "batchval_sandbox",
]


def __dir__() -> list[str]:
    """The public names, `__all__`: what `dir()` and an editor's completion show (the
    modules behind this face are not part of it)."""
    return sorted(__all__)
