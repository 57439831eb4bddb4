"""The embedded default: a sandbox in a thread when no API is configured.

It serves the shared test credential. Its limits are set for a first run to finish in
seconds rather than to mimic the API's (1,000 test calls a day would stop the sample
portfolio half way); `batchval sandbox` serves the API's own limits.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from batchval._internal.settings import FIGURES_MONTH_VARIABLE, ApiSettings

EMBEDDED_RATE_PER_SECOND = 100.0  # and a burst of as many
EMBEDDED_DAILY_LIMIT = 1_000_000


@contextmanager
def embedded_api() -> Iterator[ApiSettings]:
    # Imported here: `batchval run` imports this module whether or not an API is
    # configured, and the sandbox (starlette, uvicorn) is only needed when none is.
    from batchval._internal.sandbox.app import Sandbox
    from batchval._internal.sandbox.config import RateLimit, SandboxConfig
    from batchval._internal.sandbox.server import serve_in_thread

    rate = RateLimit(rate_per_second=EMBEDDED_RATE_PER_SECOND, burst=int(EMBEDDED_RATE_PER_SECOND))
    # Read when a run starts, never at import (load_settings has refused a bad one): a
    # pinned month for snapshot tests.
    month = os.environ.get(FIGURES_MONTH_VARIABLE) or None
    config = SandboxConfig(rate_limit=rate, figures_month=month)
    for account in config.accounts:
        account.daily_limit = EMBEDDED_DAILY_LIMIT
    with serve_in_thread(Sandbox(config)) as running:
        yield ApiSettings(
            base_url=running.base_url,
            auth_url=running.auth_url,
            client_id="sandbox-test",
            client_secret="sandbox-test-secret",
        )
