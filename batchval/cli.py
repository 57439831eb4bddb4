"""The `batchval` command line: parse, build settings, call, map to an exit code.

Exit codes are a contract with schedulers (product.md): 0 complete, 75 resumable,
77 account, 65 input, 64 command line or config.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import anyio
import click

from batchval.sandbox.app import Sandbox
from batchval.sandbox.config import ConfigError, SandboxConfig, load_config
from batchval.sandbox.server import serve_forever

EXIT_USAGE = 64


def _share(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise click.BadParameter("a share is a number from 0 to 1")
    return value


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="batchval")
def cli() -> None:
    """Bulk valuations through the Partner Valuation API, never paid twice."""


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8000, show_default=True, help="0 picks a free port.")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="YAML with accounts, limits and faults (see configs/sandbox.yaml).",
)
@click.option("--token-ttl", type=int, help="Token lifetime in seconds [1800].")
@click.option("--rate", type=float, help="Short-term limit: requests a second per account [20].")
@click.option("--burst", type=int, help="Short-term limit: bucket size [20].")
@click.option("--no-rate-limit", is_flag=True, help="Turn the short-term limit off.")
@click.option(
    "--daily-limit", type=int, help="Daily calls for every account [5000 live, 1000 test]."
)
@click.option(
    "--request-timeout", type=float, help="Seconds before a request is cut with 504 [30]."
)
@click.option("--latency-ms", type=float, help="Added to every valuation.")
@click.option("--jitter-ms", type=float, help="Plus a random extra up to this.")
@click.option("--fail-503", type=float, callback=_share, help="Share of calls answered 503.")
@click.option(
    "--fail-504-after-commit", type=float, callback=_share, help="Share valued, charged, then 504."
)
@click.option(
    "--drop-after-commit",
    type=float,
    callback=_share,
    help="Share valued, charged, then the connection is cut.",
)
@click.option("--malformed", type=float, callback=_share, help="Share with a truncated 201 body.")
@click.option("--slow", type=float, callback=_share, help="Share of calls slower than the limit.")
@click.option(
    "--revoke-tokens", type=float, callback=_share, help="Share of calls whose token dies."
)
@click.option("--seed", type=int, help="Seed of the fault generator [0].")
def sandbox(
    host: str,
    port: int,
    config_file: Path | None,
    token_ttl: int | None,
    rate: float | None,
    burst: int | None,
    no_rate_limit: bool,
    daily_limit: int | None,
    request_timeout: float | None,
    latency_ms: float | None,
    jitter_ms: float | None,
    fail_503: float | None,
    fail_504_after_commit: float | None,
    drop_after_commit: float | None,
    malformed: float | None,
    slow: float | None,
    revoke_tokens: float | None,
    seed: int | None,
) -> None:
    """Serve a local fake of the Partner API (prints one JSON line once listening)."""
    try:
        config = load_config(config_file) if config_file else SandboxConfig()
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    if token_ttl is not None:
        config.token_ttl_seconds = token_ttl
    if no_rate_limit:
        config.rate_limit = None
    elif config.rate_limit is not None:
        if rate is not None:
            config.rate_limit.rate_per_second = rate
        if burst is not None:
            config.rate_limit.burst = burst
    if daily_limit is not None:
        for account in config.accounts:
            account.daily_limit = daily_limit
    if request_timeout is not None:
        config.request_timeout_seconds = request_timeout
    if seed is not None:
        config.seed = seed
    overrides = {
        "latency_ms": latency_ms,
        "latency_jitter_ms": jitter_ms,
        "error_503_share": fail_503,
        "timeout_504_after_commit_share": fail_504_after_commit,
        "drop_after_commit_share": drop_after_commit,
        "malformed_share": malformed,
        "slow_share": slow,
        "revoke_token_share": revoke_tokens,
    }
    config.faults = dataclasses.replace(
        config.faults, **{k: v for k, v in overrides.items() if v is not None}
    )
    serve_forever(Sandbox(config), host, port)


@cli.command(hidden=True)
def demo() -> None:
    """Start the embedded sandbox and make one valuation (until `run` exists)."""
    from batchval.api import Credentials, PartnerClient, ValuationRequest
    from batchval.sandbox.server import serve_in_thread

    async def one(base_url: str, auth_url: str) -> None:
        credentials = Credentials("sandbox-test", "sandbox-test-secret")
        async with PartnerClient(
            base_url=base_url, auth_url=auth_url, credentials=credentials
        ) as api:
            request = ValuationRequest("sw1a 2aa", "terraced", bedrooms=3, include=("commentary",))
            valuation = await api.create_valuation(request, idempotency_key="demo-key-0001")
            figures = valuation.figures
            click.echo(
                json.dumps(
                    {
                        "mode": valuation.mode,
                        "id": valuation.id,
                        "estimate": figures.estimate,
                        "range": [figures.low, figures.high],
                        "summary": (valuation.commentary or {}).get("summary"),
                    },
                    indent=2,
                )
            )

    click.echo("No API configured: valuing against the embedded sandbox in TEST mode.", err=True)
    with serve_in_thread() as running:
        anyio.run(one, running.base_url, running.auth_url)


def main(argv: list[str] | None = None) -> None:
    """The console script: click's own exit code 2 for usage errors becomes 64."""
    try:
        code = cli.main(args=argv, prog_name="batchval", standalone_mode=False)
    except click.exceptions.Exit as done:
        code = done.exit_code
    except click.ClickException as exc:
        exc.show()
        code = EXIT_USAGE
    except click.Abort:
        click.echo("Aborted.", err=True)
        code = 130
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
