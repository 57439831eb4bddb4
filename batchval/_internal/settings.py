"""One frozen settings object, from the config file, the environment and the command line.

Precedence, highest first: command-line options, `BATCHVAL_*` environment variables,
the config file, defaults. Nothing here reads the environment at import time: the CLI
passes `os.environ` in, tests pass a dict.

The API is configured completely or not at all: with none of base URL, auth URL, client
id and secret given, `run` values against the embedded sandbox in test mode; with some
but not all, it is a configuration error (exit 64) rather than a silent test run.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from batchval._internal.api import INCLUDE_ITEMS, STREET_CREDITS_ASSUMED
from batchval._internal.input import (
    DEFAULT_MAX_REFUSED_SHARE,
    LENDER_FIELDS,
    IndexOptions,
    InputOptions,
    LenderOptions,
    RevaluationPolicy,
    read_config_file,
)
from batchval._internal.outcome import SettingsError
from batchval._internal.redaction import Redactor, without_password
from batchval._internal.store import azure

ENV_PREFIX = "BATCHVAL_"
# The month a sandbox's fake figures are as of, for snapshot tests (sandbox.config).
FIGURES_MONTH_VARIABLE = ENV_PREFIX + "SANDBOX_FIGURES_MONTH"


def figures_moment(month: str | None) -> dt.datetime | None:
    """The moment a pinned month's figures are drawn at (its 15th, noon UTC), or None for
    the clock's own; ValueError for anything but `YYYY-MM`."""
    if month is None:
        return None
    try:
        first = dt.datetime.strptime(month, "%Y-%m")
    except (TypeError, ValueError):
        raise ValueError(f"expected YYYY-MM, got {month!r}") from None
    return first.replace(day=15, hour=12, tzinfo=dt.UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class Key:
    """One key of the config file, stated once: the loader accepts the keys of these tables
    and no other, and the reference (docs/reference/configuration.md) is drawn from them."""

    name: str
    meaning: str
    variable: str | None = None  # the environment variable that wins over the file
    # In words, where what is found or derived stands in for a value (`found from the
    # header`); otherwise the reference shows the code's own default (admin/reference).
    default: str = ""
    # Its value is masked wherever batchval writes (the redactor knows it from the start),
    # and the reference says so.
    secret: bool = False

    @property
    def described(self) -> str:
        """What the reference says of the key: its meaning, and for a secret, that it is
        never shown."""
        return f"{self.meaning}: never printed, logged or written" if self.secret else self.meaning


API_KEYS: tuple[Key, ...] = (
    Key("base_url", "the API base URL, `/partners/v1` included", "BATCHVAL_BASE_URL"),
    Key("auth_url", "the token URL is `{auth_url}/oauth2/token`", "BATCHVAL_AUTH_URL"),
    Key("client_id", "the OAuth client id", "BATCHVAL_CLIENT_ID"),
    Key(
        "client_secret",
        "the OAuth client secret, best kept in the environment",
        "BATCHVAL_CLIENT_SECRET",
        secret=True,
    ),
)


@dataclasses.dataclass(frozen=True, slots=True)
class ApiSettings:
    base_url: str
    auth_url: str
    client_id: str
    client_secret: str = dataclasses.field(repr=False)  # never printed, logged or written


def api_identity(api: ApiSettings | None) -> str:
    """Which API and account answer a DIR (never the secret), as its checkpoint keeps it
    (`api_identity`): a hash of the base URL and client id, or of `embedded` for the
    embedded sandbox (which forgets every valuation when its run ends)."""
    who = "embedded" if api is None else f"{api.base_url}\n{api.client_id}"
    return hashlib.sha256(who.encode()).hexdigest()


@dataclasses.dataclass(frozen=True, slots=True)
class RunOptions:
    concurrency: int = 8  # the most requests in flight at once; the pool may use fewer
    max_credits: int | None = None  # never spend more than this in one invocation
    max_attempts: int = 6  # per request and invocation, for transient failures
    outage_seconds: float = 120.0  # only failures for this long: stop api_unavailable (75)
    unrecognised_limit: int = 10  # answers the API does not give, before stopping (75)
    wait_for_midnight: bool = False  # at the daily limit: wait for midnight UTC, not exit 75
    timeout_seconds: float = 35.0  # the API cuts requests at 30 s
    shutdown_grace_seconds: float = 5.0  # on SIGTERM, how long in-flight calls may finish
    progress_seconds: float = 10.0  # how often a progress event is logged
    # `streets`: the credits one street analysis is assumed to cost for --max-credits and
    # --dry-run (the API does not say; raised to the largest charge a DIR has seen), and
    # whether to write homes_with_street.parquet without --join.
    street_credits: int = STREET_CREDITS_ASSUMED
    street_join: bool = False
    metrics_seconds: float = 30.0  # how often --metrics-file is rewritten during a run
    # More than this share of the rows refused by validation: stop before any call,
    # input_mostly_refused (65); 0: never (input/refused says why half). Not in the
    # settings' fingerprint: it shapes no request, so a DIR it refused takes a new value.
    max_refused_share: float = DEFAULT_MAX_REFUSED_SHARE
    # `run --book`: the book's path (None: no book), the column that names a row (None: the
    # canonical request does), how many days a book valuation stays fresh, and the most
    # valuations a night may ask for.
    book: str | None = None
    row_id: str | None = None
    fresh_for_days: float = 30.0
    max_calls: int | None = None
    # Refuse (64) before anything is sent unless a live API is configured: no embedded
    # sandbox, no token of the test scope (money/live).
    live: bool = False
    # Not a setting: --live's verdict on a sandbox started with --rehearsal (money/live).
    rehearsal: bool = False
    # Test seam: added to the wall clock (`now`) when deciding whether midnight UTC has
    # passed, as BATCHVAL_CLOCK_OFFSET_SECONDS.
    clock_offset_seconds: float = 0.0

    def now(self) -> dt.datetime:
        """The run's clock: UTC wall time plus the test seam's offset. One clock for
        everything that takes or checks a daily limit's `not_before` (the pool, the
        waits of `sending/sending`, the gates of run, streets and verify), the default run
        id and the summary's times: tests move it as they move the sandbox's."""
        return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=self.clock_offset_seconds)


# The config's `run` section (and `include`, which lives there for people and in the input
# options for the code); the defaults are RunOptions'.
RUN_KEYS: tuple[Key, ...] = (
    Key("concurrency", "the most requests in flight at once (`--concurrency`)"),
    Key("include", "extras for every valuation: `commentary`, `rebuildCost` (`--include`)"),
    Key("max_credits", "never spend more than this in one invocation (`--max-credits`)"),
    Key("max_attempts", "attempts per request and invocation, for transient failures"),
    Key("outage_seconds", "only failures for this long: stop, `api_unavailable` (75)"),
    Key("unrecognised_limit", "answers the API does not give, before stopping (75)"),
    Key("wait_for_midnight", "at the daily limit, wait for midnight UTC rather than exit 75"),
    Key("timeout_seconds", "how long one call may take (the API cuts requests at 30 s)"),
    Key("shutdown_grace_seconds", "on SIGTERM, how long calls in flight may finish"),
    Key("progress_seconds", "how often a progress event is logged"),
    Key(
        "street_credits",
        "`streets`: the credits one street analysis is assumed to cost for `--max-credits` "
        "and `--dry-run` (the API does not say; raised to the largest charge DIR has seen)",
    ),
    Key("street_join", "`streets`: write homes_with_street.parquet without `--join`"),
    Key("metrics_seconds", "how often `--metrics-file` is rewritten during a run"),
    Key(
        "max_refused_share",
        "more than this share of the rows refused by validation: send nothing, "
        "`input_mostly_refused` (65); 0: never",
    ),
    Key("book", "`run --book`: the book's path or URL (`--book`)"),
    Key("row_id", "with a book: the column that names a row; default the request (`--row-id`)"),
    Key("fresh_for_days", "with a book: days a valuation stays fresh (`--fresh-for`)"),
    Key("max_calls", "with a book: the most valuations a night asks for (`--max-calls`)"),
    Key(
        "live",
        "`run`, `streets`, `verify`: refuse (64) before sending unless a live API is "
        "configured: not the embedded sandbox, not test credentials (`--live`)",
    ),
)

# The config's `input` section; `--encoding` and `--sheet` win over its own.
INPUT_KEYS: tuple[Key, ...] = (
    Key("delimiter", "a CSV's delimiter, one character", default="found from the header"),
    Key(
        "encoding",
        "a CSV's encoding (`--encoding`): `utf-8`, `cp1252`, `latin-1`, ...",
        default="found: UTF-8, else cp1252",
    ),
    Key("sheet", "an Excel workbook's sheet (`--sheet`)", default="the first"),
    Key(
        "header_row",
        "the line of a CSV file or a sheet that holds the header (`--header-row`)",
        default="found: the first line that names fields, below any title",
    ),
    Key("columns", "API field (or `include`, or a lender field) -> your column", default="{}"),
    Key("values", "API field -> {your value: API value}", default="{}"),
    Key(
        "passthrough",
        "the columns copied to the outputs, in this order; the lender columns it does not "
        "list follow (a loan's figures never depend on it); a column the file lacks: 64",
        default="every column that is not a request field, less personal data (names, "
        "birth dates, e-mail, telephone and NI numbers, address lines)",
    ),
    Key("batch_rows", "rows read and validated at a time"),
    Key(
        "not_loans",
        "`{set_aside: [...], keep: [...]}`: lines (numbers, which move each month) or "
        "patterns (regular expressions found in a row's label, any case) of the table set "
        "aside as not loans, or kept as loans, whatever batchval's rules say",
        default="the rules: subtotals, totals, headings and notes are set aside",
    ),
)

# The config's `lender` section (input/lender.LenderOptions holds the defaults).
LENDER_KEYS: tuple[Key, ...] = (
    Key("ltv_bands", "the loan-to-value bands' upper edges, in percent, ascending"),
    Key("wide_range", "`wide_range` is set when (high - low) / estimate is above it"),
    Key(
        "stale_after_months",
        "`stale_index` is set when `indexedTo` is more than this many months old",
    ),
    Key(
        "revaluation",
        "when a loan's last valuation is due again: `fall_share` (0.10), `max_age_years` (5), "
        "`large_loan_balance` (2600000), `large_loan_max_age_years` (3)",
        default="the PRA's Basel 3.1 triggers (CRR Article 124D(5))",
    ),
)

# The config's `storage` section: each key and the variable AWS's or Azure's own tools read
# it from, which wins over the config when it is set (as the variable does over the API's
# keys). `endpoint` serves both: it stands for `AZURE_STORAGE_ENDPOINT` too (`_storage`).
STORAGE: tuple[Key, ...] = (
    Key(
        "endpoint",
        "an S3-compatible server's URL, or an Azure Blob endpoint (`AZURE_STORAGE_ENDPOINT`)",
        "AWS_ENDPOINT_URL",
        "AWS's or Azure's own",
    ),
    Key("region", "the bucket's region", "AWS_REGION"),
    Key("access_key_id", "the access key id", "AWS_ACCESS_KEY_ID"),
    Key("secret_access_key", "the secret access key", "AWS_SECRET_ACCESS_KEY", secret=True),
    Key(
        "session_token",
        "a session token, for temporary credentials",
        "AWS_SESSION_TOKEN",
        secret=True,
    ),
    Key("account_name", "the Azure storage account", azure.ACCOUNT_NAME),
    Key("account_key", "the Azure storage account's key", azure.ACCOUNT_KEY, secret=True),
    Key("sas_token", "an Azure SAS token (its query string)", azure.SAS_TOKEN, secret=True),
    Key(
        "connection_string",
        "an Azure connection string, alone (not beside the account, key, SAS token or endpoint)",
        azure.CONNECTION_STRING,
        secret=True,
    ),
)
STORAGE_KEYS: Mapping[str, str] = {key.name: str(key.variable) for key in STORAGE}

# The config's `index` section (input/hpi.IndexOptions holds the defaults).
INDEX_KEYS: tuple[Key, ...] = (
    Key(
        "source",
        "`ukhpi`: every loan rolled forward by HM Land Registry's UK House Price Index "
        "(monitoring between valuations, never a valuation); `api`: by the API's own index "
        "for each local authority, read from street analyses and held in the `--book`; "
        "`none`: no index columns",
    ),
    Key(
        "file",
        "the UK HPI full file (CSV): a path, an `s3://` or `az://` URL, or an `https://` "
        "(or `http://`) URL with its `index.sha256`, downloaded once into the cache",
    ),
    Key(
        "sha256",
        "`index.file`'s sha256 (as `sha256sum FILE` prints it): the file is checked against "
        "it wherever it is (65 when it differs); needed for an `https://` or `http://` URL",
    ),
    Key(
        "postcodes",
        "a postcode directory (the ONS Postcode Directory's shape) giving each postcode's "
        "local authority, for loans without a valuation of their own (a path or a URL, as "
        "`index.file`)",
    ),
    Key("postcodes_sha256", "`index.postcodes`'s sha256, as `index.sha256` is the file's"),
    Key("postcode_column", "the postcode directory's postcode column"),
    Key("authority_column", "the postcode directory's local authority column"),
)

# The config's `book` section: how a `--book` night orders the loans it may value.
BOOK_ORDERS = ("risk", "staleness")  # the first is the default


@dataclasses.dataclass(frozen=True, slots=True)
class BookOptions:
    """`book.order`: `risk` (never valued, changed, a trigger, an LTV above `ltv_watch`,
    then balance x staleness) or `staleness` (batchval 0.x's: never valued, changed, then
    stale by their last LTV); `book.ltv_watch`, the LTVs watched (`valuations/booking`)."""

    order: str = BOOK_ORDERS[0]
    ltv_watch: tuple[float, ...] = (0.8, 0.9)

    def to_json(self) -> dict[str, Any]:
        return {"order": self.order, "ltv_watch": list(self.ltv_watch)}


BOOK_KEYS: tuple[Key, ...] = (
    Key(
        "order",
        "the order a `--book` night values its loans in, within its budget: `risk` (never "
        "valued by the API, largest balance first; then changed records; then stale loans "
        "with a revaluation trigger, the market fall by the index among them; then stale "
        "loans whose LTV is above a `ltv_watch` figure, highest first; then the rest by "
        "balance x days since their valuation) or `staleness` (never valued, changed, then "
        "stale loans by their last `indexed_ltv`, highest first) (`--book-order`)",
    ),
    Key(
        "ltv_watch",
        "the loan-to-value ratios watched by the `risk` order (a list of shares): a stale "
        "loan above the lowest comes before those below it; its LTV is `hpi_ltv` with an "
        "`index`, else the balance over its last estimate",
    ),
)

# The config's `output` section: who may read what batchval writes (place/files.MODES).
OUTPUT_KEYS: tuple[Key, ...] = (
    Key(
        "mode",
        "who may read the files batchval writes (results, checkpoint, exports, report, book): "
        "`private`, the account that runs batchval alone (files 0600, folders 0700), or "
        "`group`, its group too (0640, 0750), for a reader under another account",
        "BATCHVAL_OUTPUT_MODE",
    ),
)
OUTPUT_MODES = ("private", "group")  # the first is the default

# The config file's sections: `sandbox` is `batchval sandbox --config`'s (configs/sandbox.yaml),
# which one file may hold beside batchval's own.
SECTIONS: Mapping[str, tuple[Key, ...]] = {
    "api": API_KEYS,
    "input": INPUT_KEYS,
    "run": RUN_KEYS,
    "lender": LENDER_KEYS,
    "storage": STORAGE,
    "index": INDEX_KEYS,
    "book": BOOK_KEYS,
    "output": OUTPUT_KEYS,
    "sandbox": (),
}

# Azure's own variables that hold a secret beside the storage section's (store/azure.secrets
# reads those, and the secrets inside a connection string): masked whenever they are set.
AZURE_SECRETS = ("AZURE_CLIENT_SECRET",)


@dataclasses.dataclass(frozen=True, slots=True)
class StorageSettings:
    """The object store of a run kept at a URL (`--out s3://...`, an s3:// INPUT or
    `--book`), as the config's `storage` section gives it: by variable name."""

    # Never printed, logged or written (the manifest's settings leave the section out).
    given: Mapping[str, str] = dataclasses.field(default_factory=dict, repr=False)

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The variables an object store is read from (`store/objects`): the config's,
        each overridden by the environment's own when that is set."""
        return {**self.given, **{name: value for name, value in env.items() if value}}

    def secrets(self, env: Mapping[str, str]) -> list[str]:
        found = self.env(env)
        named = [str(key.variable) for key in STORAGE if key.secret] + list(AZURE_SECRETS)
        texts = [found[name] for name in named if found.get(name)] + azure.secrets(found)
        return list(dict.fromkeys(texts))


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    api: ApiSettings | None  # None: the embedded sandbox, test mode
    input: InputOptions
    run: RunOptions
    lender: LenderOptions = dataclasses.field(default_factory=LenderOptions)
    storage: StorageSettings = dataclasses.field(default_factory=StorageSettings)
    output_mode: str = OUTPUT_MODES[0]  # `output.mode`: who may read what batchval writes
    index: IndexOptions = dataclasses.field(default_factory=IndexOptions)
    book: BookOptions = dataclasses.field(default_factory=BookOptions)

    def read_at(self, header_line: int | None) -> Settings:
        """These settings with the header on the line the input was read at, as if it had
        been stated: a header found on line 5 and `header_row: 5` are one run, and naming
        another line changes the input's shaping (`shaping`)."""
        if header_line is None or self.input.header_row is not None:
            return self
        return dataclasses.replace(
            self, input=dataclasses.replace(self.input, header_row=header_line)
        )

    def fingerprint(self) -> str:
        """What must not change under a resumed run: everything that shapes the requests,
        and what decides how the input is read and what rides along with each row.

        Deterministic: sorted JSON of plain values. The encoding is the codec's own name
        (`latin-1` and `iso-8859-1` are one), a delimiter or passthrough left to be
        detected or defaulted is null, and the passthrough keeps its order (the order of
        the output columns).

        An encoding left to be found is `utf-8`, as every DIR begun before it could be
        found stored it: what is found comes from the file's bytes alone
        (`sniff.detect_encoding`), which the input's own fingerprint holds, so the same
        file with the same command is read the same way and resumes. A workbook's sheet,
        when named, is a setting like the delimiter (absent when not named, so that no
        earlier DIR's fingerprint changes): another sheet is another run.
        """
        return _digest(self.shaping())

    def shaping(self) -> dict[str, Any]:
        """What `fingerprint` digests, as plain values (a DIR keeps it, so that a refusal
        of changed settings can name the one that changed). It holds no secret."""
        passthrough = self.input.passthrough
        return {
            **self._request_shaping(),
            # The API's address, not the client id: a rotated secret comes as a new login
            # of the same account, and keys never depend on credentials (nor a proxy's
            # password in the URL, which the DIR keeps masked).
            "api": None if self.api is None else without_password(self.api.base_url),
            "encoding": self.input.codec or "utf-8",
            "delimiter": self.input.delimiter,
            "passthrough": None if passthrough is None else list(passthrough),
            **({} if self.input.sheet is None else {"sheet": self.input.sheet}),
            # A header on the first line (where every DIR begun before it could be found
            # had it) is left out, so that no earlier DIR's fingerprint changes.
            **({} if self.input.header_row in (None, 1) else {"header_row": self.input.header_row}),
            # Which rows are loans: absent when not corrected, as in every earlier DIR.
            **({"not_loans": self.input.not_loans.to_json()} if self.input.not_loans else {}),
        }

    def fingerprint_0_1(self) -> str:
        """The fingerprint batchval 0.1 stored for these settings, so that a DIR it began
        is resumed rather than refused."""
        shaping = {
            **self._request_shaping(),
            "api": None if self.api is None else [self.api.base_url, self.api.client_id],
        }
        return _digest(shaping)

    def secrets(self, env: Mapping[str, str]) -> list[tuple[str, str | None]]:
        """Each secret these settings and `env` hold, with the id it goes with in HTTP
        Basic (the client's), for the redactor: the client secret, the store's keys."""
        found: list[tuple[str, str | None]] = []
        if self.api is not None:
            found.append((self.api.client_secret, self.api.client_id))
        return found + [(secret, None) for secret in self.storage.secrets(env)]

    def to_json(self) -> dict[str, Any]:
        """The settings as plain JSON, for the run's manifest: never the client secret,
        nor a password inside a URL (the caller also scrubs the text with the `Redactor`)."""
        api = self.api
        options = self.input
        run = dataclasses.asdict(self.run)
        del run["clock_offset_seconds"]  # a test seam, not a setting
        return {
            "api": None
            if api is None
            else {
                "base_url": without_password(api.base_url),
                "auth_url": without_password(api.auth_url),
                "client_id": api.client_id,
            },
            "input": options.to_json(),
            "run": {**run, "include": list(options.include)},
            "lender": self.lender.to_json(),
            "output": {"mode": self.output_mode},
            "index": self.index.to_json(),
            "book": self.book.to_json(),
        }

    def _request_shaping(self) -> dict[str, Any]:
        # The lender columns shape no request, and every pass-through value is kept
        # whatever they map: a change of them never refuses a resumed run.
        columns = {k: v for k, v in self.input.columns.items() if k not in LENDER_FIELDS}
        return {
            "columns": columns,
            "values": {k: dict(v) for k, v in self.input.values.items()},
            "include": sorted(set(self.input.include)),
        }


def changed_settings(before: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """`name: old -> new` for each setting of `shaping` that differs (values cut short)."""

    def shown(value: Any) -> str:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        return text if len(text) <= 60 else text[:59] + "…"

    names = sorted(set(before) | set(now))
    return [
        f"{name}: {shown(before.get(name))} -> {shown(now.get(name))}"
        for name in names
        if before.get(name) != now.get(name)
    ]


def _digest(shaping: Mapping[str, Any]) -> str:
    text = json.dumps(shaping, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _section(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    part = data.get(name) or {}
    if not isinstance(part, Mapping):
        raise SettingsError(f"config section {name!r} must be a mapping")
    return dict(part)


def _reject_unknown(part: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(part) - known)
    if unknown:
        raise SettingsError(
            f"unknown setting(s) in {where}: {', '.join(map(str, unknown))}; "
            f"{where} takes {', '.join(sorted(known))}"
        )


def _read_config(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    data = read_config_file(path)
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise SettingsError(f"config {path} must be a mapping at the top level")
    _reject_unknown(data, set(SECTIONS), str(path))
    return dict(data)


def _api(config: Mapping[str, Any], env: Mapping[str, str]) -> ApiSettings | None:
    section = _section(config, "api")
    names = tuple(key.name for key in API_KEYS)
    _reject_unknown(section, set(names), "api")
    values = {n: env.get(ENV_PREFIX + n.upper()) or section.get(n) for n in names}
    given = {n for n, v in values.items() if v}
    if not given:
        return None
    missing = [ENV_PREFIX + n.upper() for n in names if n not in given]
    if missing:
        raise SettingsError(
            "the API is partly configured; also set "
            + ", ".join(missing)
            + " (or the api section of the config); with none of them set, "
            "batchval runs against the embedded sandbox"
        )
    for name in names:
        if not isinstance(values[name], str):
            raise SettingsError(f"api.{name} must be a string")
    for name in ("base_url", "auth_url"):
        url = urllib.parse.urlsplit(str(values[name]).strip())
        if url.scheme not in ("http", "https") or not url.hostname:
            raise SettingsError(
                f"{ENV_PREFIX}{name.upper()} (api.{name}) must be an http or https URL "
                f"with a host, such as https://api.example.com/partners/v1"
            )
    return ApiSettings(**{n: str(values[n]).strip() for n in names})


def _storage(config: Mapping[str, Any]) -> StorageSettings:
    section = _section(config, "storage")
    _reject_unknown(section, set(STORAGE_KEYS), "storage")
    for name, value in section.items():
        if not isinstance(value, str) or not value:
            raise SettingsError(f"storage.{name} must be a string")
    given = {STORAGE_KEYS[name]: value for name, value in section.items()}
    if "endpoint" in section:  # one endpoint key for either store
        given[azure.ENDPOINT] = section["endpoint"]
    return StorageSettings(given)


def _include(items: Any, where: str) -> tuple[str, ...]:
    if items is None:
        return ()
    if isinstance(items, str):
        items = [i.strip() for i in items.split(",") if i.strip()]
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise SettingsError(f"{where} must be a list of {', '.join(INCLUDE_ITEMS)}")
    bad = sorted(set(items) - set(INCLUDE_ITEMS))
    if bad:
        raise SettingsError(
            f"{where}: unknown item {bad[0]!r}; allowed: {', '.join(INCLUDE_ITEMS)}"
        )
    return tuple(sorted(set(items)))


def _input(
    config: Mapping[str, Any], include: tuple[str, ...], reading: Mapping[str, str | int | None]
) -> InputOptions:
    """The input section, with `reading` (the command line's --encoding, --sheet and
    --header-row) over the config's own."""
    section = _section(config, "input")
    _reject_unknown(section, {key.name for key in INPUT_KEYS}, "input")
    return InputOptions.of(section, include, reading)


def _index(config: Mapping[str, Any], given: Mapping[str, Any], book: str | None) -> IndexOptions:
    """`index`, the command line's (or the Python API's) keys over the config's; `api`
    only with a `book`, which holds its months."""
    section = _section(config, "index")
    _reject_unknown(section, {key.name for key in INDEX_KEYS}, "index")
    found = IndexOptions.of({**section, **{k: v for k, v in given.items() if v is not None}})
    if found.source == "api" and book is None:
        raise SettingsError("index.source api holds the index in the book: give --book PATH")
    return found


def _book(config: Mapping[str, Any], given: Mapping[str, Any]) -> BookOptions:
    """`book`, the command line's (or the Python API's) keys over the config's."""
    section = {**_section(config, "book"), **{k: v for k, v in given.items() if v is not None}}
    _reject_unknown(section, {key.name for key in BOOK_KEYS}, "book")
    order = section.get("order", BOOK_ORDERS[0])
    if order not in BOOK_ORDERS:
        raise SettingsError(f"book.order must be {' or '.join(BOOK_ORDERS)}, not {order!r}")
    watch = section.get("ltv_watch", BookOptions().ltv_watch)
    if not isinstance(watch, list | tuple) or not all(
        isinstance(x, int | float) and not isinstance(x, bool) and x > 0 for x in watch
    ):
        raise SettingsError("book.ltv_watch must be a list of LTVs above 0, such as [0.8, 0.9]")
    return BookOptions(order=str(order), ltv_watch=tuple(sorted(float(x) for x in watch)))


def _output_mode(config: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """`output.mode`, the environment's `BATCHVAL_OUTPUT_MODE` over the config's."""
    section = _section(config, "output")
    _reject_unknown(section, {key.name for key in OUTPUT_KEYS}, "output")
    return _mode(env.get(str(OUTPUT_KEYS[0].variable)) or section.get("mode"))


def env_output_mode(env: Mapping[str, str]) -> str:
    """`BATCHVAL_OUTPUT_MODE` alone, for the commands that read no config (`export`)."""
    return _mode(env.get(str(OUTPUT_KEYS[0].variable)) or None)


def _mode(given: object) -> str:
    """A mode of `OUTPUT_MODES` (None: `private`); SettingsError (64) for anything else."""
    if given is None:
        return OUTPUT_MODES[0]
    if given not in OUTPUT_MODES:
        raise SettingsError(f"output.mode must be {' or '.join(OUTPUT_MODES)}, not {given!r}")
    return str(given)


def _lender(config: Mapping[str, Any]) -> LenderOptions:
    section = _section(config, "lender")
    default = LenderOptions()
    _reject_unknown(section, {key.name for key in LENDER_KEYS}, "lender")
    bands = section.get("ltv_bands", default.ltv_bands)
    if not isinstance(bands, list | tuple):
        raise SettingsError("lender.ltv_bands must be a list of numbers (percent)")
    try:
        return LenderOptions(
            ltv_bands=tuple(bands),
            wide_range=section.get("wide_range", default.wide_range),
            stale_after_months=section.get("stale_after_months", default.stale_after_months),
            revaluation=_revaluation(section.get("revaluation")),
        )
    except (ValueError, TypeError) as exc:
        raise SettingsError(str(exc)) from None


def _revaluation(given: Any) -> RevaluationPolicy:
    """`lender.revaluation`: the policy's keys, each defaulting to the rule's figure."""
    if given is None:
        return RevaluationPolicy()
    if not isinstance(given, Mapping):
        raise SettingsError("lender.revaluation must be a mapping (fall_share: 0.10, ...)")
    known = {f.name for f in dataclasses.fields(RevaluationPolicy)}
    _reject_unknown(given, known, "lender.revaluation")
    return RevaluationPolicy(**{k: v for k, v in given.items() if k in known})


def _number(value: Any, where: str, *, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise SettingsError(f"{where} must be a number of at least {minimum:g}")
    return float(value)


def _share(value: Any) -> float:
    share = _number(value, "run.max_refused_share", minimum=0)
    if share > 1:
        raise SettingsError("run.max_refused_share must be a share from 0 to 1 (0: off)")
    return share


def env_redactor(env: Mapping[str, str]) -> Redactor:
    """A redactor that knows every secret the environment holds (the client secret of
    `BATCHVAL_CLIENT_SECRET`, the object store's keys), before any config is read: what
    a command that reads no config (`report`, `export`, `status`) may still meet."""
    redactor = Redactor()
    secret = env.get(ENV_PREFIX + "CLIENT_SECRET")
    if secret:
        redactor.add(secret, user=env.get(ENV_PREFIX + "CLIENT_ID"))
    for stored in StorageSettings().secrets(env):
        redactor.add(stored)
    return redactor


def load_settings(
    config_file: Path | None,
    env: Mapping[str, str],
    *,
    concurrency: int | None = None,
    include: str | None = None,
    max_credits: int | None = None,
    book: Mapping[str, Any] | None = None,
    encoding: str | None = None,
    sheet: str | None = None,
    header_row: int | None = None,
    live: bool = False,
    run_settings: Mapping[str, Any] | None = None,
    index: Mapping[str, Any] | None = None,
    book_order: Mapping[str, Any] | None = None,
) -> Settings:
    """Settings for `run`, `streets`, `check`, `split` and `--dry-run`; raises
    SettingsError (exit 64). `encoding`, `sheet` and `header_row` (--encoding, --sheet,
    --header-row) win over the config's input section; `live` (--live) can only turn
    `run.live` on. `run_settings` (the Python API's keywords) win over the config's run
    section, by the same names, `index` (--index-file, ...) over its index section and
    `book_order` (--book-order) over its book section."""
    config = _read_config(config_file)
    run = _section(config, "run")
    run.update(run_settings or {})
    _reject_unknown(run, {key.name for key in RUN_KEYS}, "run")
    includes = _include(include if include is not None else run.get("include"), "include")
    if concurrency is not None:
        run["concurrency"] = concurrency
    if max_credits is not None:
        run["max_credits"] = max_credits
    given = {k: v for k, v in (book or {}).items() if v is not None}  # --book, --row-id, ...
    if given and run.get("book") is None and given.get("book") is None:
        raise SettingsError("--row-id, --fresh-for and --max-calls go with --book PATH")
    run.update(given)
    if live:
        run["live"] = True
    if not isinstance(run.get("live", False), bool):
        raise SettingsError("run.live must be true or false")
    try:  # read by the embedded sandbox as a run starts: refused here, before anything
        figures_moment(env.get(FIGURES_MONTH_VARIABLE) or None)
    except ValueError as exc:
        raise SettingsError(f"{FIGURES_MONTH_VARIABLE}: {exc}") from None
    offset = env.get(ENV_PREFIX + "CLOCK_OFFSET_SECONDS") or "0"
    try:
        clock_offset = float(offset)
    except ValueError:
        raise SettingsError(f"{ENV_PREFIX}CLOCK_OFFSET_SECONDS must be a number") from None

    default = RunOptions()  # the defaults are the dataclass's, stated once

    def number(name: str, minimum: float) -> float:
        return _number(run.get(name, getattr(default, name)), f"run.{name}", minimum=minimum)

    credits, calls, row_id = run.get("max_credits"), run.get("max_calls"), run.get("row_id")
    for name in ("row_id", "book"):
        if run.get(name) is not None and (not isinstance(run[name], str) or not run[name]):
            raise SettingsError(f"run.{name} must be a {'path' if name == 'book' else 'column'}")
    options = RunOptions(
        concurrency=int(number("concurrency", 1)),
        max_credits=None if credits is None else int(number("max_credits", 0)),
        max_attempts=int(number("max_attempts", 1)),
        outage_seconds=number("outage_seconds", 1),
        unrecognised_limit=int(number("unrecognised_limit", 1)),
        wait_for_midnight=bool(run.get("wait_for_midnight", default.wait_for_midnight)),
        timeout_seconds=number("timeout_seconds", 0.1),
        shutdown_grace_seconds=number("shutdown_grace_seconds", 0),
        progress_seconds=number("progress_seconds", 0.1),
        street_credits=int(number("street_credits", 0)),
        street_join=bool(run.get("street_join", default.street_join)),
        metrics_seconds=number("metrics_seconds", 0.1),
        max_refused_share=_share(run.get("max_refused_share", default.max_refused_share)),
        book=run.get("book"),
        row_id=row_id,
        fresh_for_days=number("fresh_for_days", 0),
        max_calls=None if calls is None else int(number("max_calls", 0)),
        live=run.get("live", default.live),
        clock_offset_seconds=clock_offset,
    )
    return Settings(
        api=_api(config, env),
        input=_input(
            config, includes, {"encoding": encoding, "sheet": sheet, "header_row": header_row}
        ),
        run=options,
        lender=_lender(config),
        storage=_storage(config),
        output_mode=_output_mode(config, env),
        index=_index(config, index or {}, options.book),
        book=_book(config, book_order or {}),
    )
