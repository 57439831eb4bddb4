"""The sandbox's settings: accounts, limits and faults, from code or a YAML file.

Everything the API description leaves "not shown" is a setting here, with the value the
sandbox uses by default written beside it, so that tests and users can choose.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from batchval._internal import settings
from batchval._internal.sandbox.answers import STAMP_PRECISIONS

_T = TypeVar("_T")

TEST_SCOPE = "partners:test"
LIVE_SCOPE = "partners:read"


@dataclasses.dataclass(slots=True)
class Account:
    """A client credential and the account behind it. Mutable: balance and flags change."""

    client_id: str
    client_secret: str
    scope: str = LIVE_SCOPE
    balance: int = 1_000_000
    blocked: bool = False
    # Calls that create a valuation or a charged street analysis, per UTC day.
    daily_limit: int | None = None  # None: the API's own, 5,000 live and 1,000 test

    @property
    def test_mode(self) -> bool:
        return self.scope == TEST_SCOPE

    @property
    def effective_daily_limit(self) -> int:
        if self.daily_limit is not None:
            return self.daily_limit
        return 1_000 if self.test_mode else 5_000


@dataclasses.dataclass(slots=True)
class RateLimit:
    """The short-term limit, a token bucket per account (the API does not publish its own)."""

    rate_per_second: float = 20.0
    burst: int = 20


@dataclasses.dataclass(slots=True)
class Faults:
    """Injected failures; shares are probabilities per call, drawn from a seeded generator."""

    latency_ms: float = 0.0  # added to every valuation and street analysis
    latency_jitter_ms: float = 0.0  # plus a uniform extra in [0, jitter)
    error_503_share: float = 0.0  # answered data-unavailable before any work, never charged
    timeout_504_after_commit_share: float = 0.0  # valued and charged, then answered 504
    drop_after_commit_share: float = 0.0  # valued and charged, then the connection is cut
    malformed_share: float = 0.0  # valued and charged, then a truncated 201 body
    slow_share: float = 0.0  # the work takes slow_seconds; past request_timeout it is a 504
    slow_seconds: float = 35.0
    revoke_token_share: float = 0.0  # the caller's token is revoked before the call is served
    rate_limit_storm_share: float = 0.0  # answered 429 with a long Retry-After, whatever the rate
    storm_retry_after_seconds: int = 5
    outage_seconds: float = 0.0  # from the moment these faults are applied: every call 503
    # The outage starts at the first call after these faults are applied, not at once: a
    # test's outage then strikes however long the client takes to start.
    outage_from_first_call: bool = False


@dataclasses.dataclass(slots=True)
class SandboxConfig:
    accounts: list[Account] = dataclasses.field(default_factory=lambda: default_accounts())
    token_ttl_seconds: int = 1800
    rate_limit: RateLimit | None = dataclasses.field(default_factory=RateLimit)
    # The API stops a request at 30 s and answers 504; tests make it short.
    request_timeout_seconds: float = 30.0
    # The credit cost of a street analysis is not shown in the API description.
    street_analysis_credits: int = 20
    valuation_credits: int = 10
    faults: Faults = dataclasses.field(default_factory=Faults)
    seed: int = 0
    # "YYYY-MM": the month the fake figures are as of (price index, sold prices, rebuild
    # costs, crime), whatever the clock says; None: the clock's month. Snapshot tests pin
    # it so that their figures do not move each month (BATCHVAL_SANDBOX_FIGURES_MONTH).
    figures_month: str | None = None
    # How finely valuedAt is stamped: "second", "milli" (the default) or "micro". An API
    # that cuts its stamps to whole seconds is what a client's money must survive.
    stamp_precision: str = "milli"
    # Every token answer says it is this sandbox's (`SANDBOX_CLAIM`): `fake`, which
    # `--live` refuses, or with `rehearsal` (`batchval sandbox --rehearsal`) `rehearsal`,
    # which `--live` takes for the docs' walk-throughs, the run's mode then `rehearsal`.
    rehearsal: bool = False
    docs_base: str = "https://developer.partner-valuations.example"

    def account(self, client_id: str) -> Account | None:
        return next((a for a in self.accounts if a.client_id == client_id), None)


def default_accounts() -> list[Account]:
    """The built-in credentials, documented like a payment provider's test keys."""
    return [
        Account("sandbox-test", "sandbox-test-secret", scope=TEST_SCOPE, balance=0),
        Account("sandbox-live", "sandbox-live-secret", scope=LIVE_SCOPE, balance=1_000_000),
    ]


class ConfigError(ValueError):
    """The sandbox configuration file cannot be used."""


def _build(cls: type[_T], data: Any, where: str) -> _T:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown setting(s): {', '.join(map(str, unknown))}")
    try:
        built = cls(**dict(data))
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    for f in dataclasses.fields(built):  # type: ignore[arg-type]
        _check_value(f.name, getattr(built, f.name), f.type, where)
    return built


# Settings that divide or bound time: zero would make no sense.
_POSITIVE = frozenset({"rate_per_second", "burst", "token_ttl_seconds", "request_timeout_seconds"})


def _check_value(name: str, value: Any, declared: Any, where: str) -> None:
    """Types and ranges of the plain settings (nested ones are checked on their own)."""
    text = str(declared)
    if value is None and "None" in text:
        return
    if text.startswith(("float", "int")):
        number_ok = isinstance(value, int | float) and not isinstance(value, bool)
        if text.startswith("int"):
            number_ok = number_ok and float(value).is_integer()
        low = 0 if name not in _POSITIVE else 1e-9
        if not number_ok or value < low:
            least = "above 0" if low else "of 0 or more"
            raise ConfigError(f"{where}.{name}: expected a number {least}, got {value!r}")
        if name.endswith("_share") and value > 1:
            raise ConfigError(f"{where}.{name}: a share is a number from 0 to 1, got {value!r}")
    elif text == "bool" and not isinstance(value, bool):
        raise ConfigError(f"{where}.{name}: expected true or false, got {value!r}")
    elif text == "str" and not isinstance(value, str):
        raise ConfigError(f"{where}.{name}: expected a string, got {value!r}")


def figures_moment(month: str | None) -> dt.datetime | None:
    """`settings.figures_moment`, refusing anything but `YYYY-MM` with a ConfigError."""
    try:
        return settings.figures_moment(month)
    except ValueError as exc:
        raise ConfigError(f"figures_month: {exc}") from None


def config_from_mapping(data: Mapping[str, Any]) -> SandboxConfig:
    """A config from parsed YAML. Accounts listed are added to the built-in ones."""
    data = dict(data)
    accounts = default_accounts()
    for i, raw in enumerate(data.pop("accounts", None) or []):
        extra = _build(Account, raw, f"accounts[{i}]")
        accounts = [a for a in accounts if a.client_id != extra.client_id] + [extra]
    rate_raw = data.pop("rate_limit", {})
    rate = None if rate_raw is None else _build(RateLimit, rate_raw, "rate_limit")
    faults = _build(Faults, data.pop("faults", None) or {}, "faults")
    config = _build(SandboxConfig, data, "sandbox config")
    figures_moment(config.figures_month)
    if config.stamp_precision not in STAMP_PRECISIONS:
        choices = ", ".join(STAMP_PRECISIONS)
        raise ConfigError(f"stamp_precision: one of {choices}, not {config.stamp_precision!r}")
    config.accounts, config.rate_limit, config.faults = accounts, rate, faults
    return config


def load_config(path: Path) -> SandboxConfig:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    sandbox_part = data.get("sandbox", data)
    return config_from_mapping(sandbox_part)
