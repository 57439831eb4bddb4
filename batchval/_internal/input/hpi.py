"""The UK House Price Index, and the postcode directory that places a home in its local
authority: the files a book night reads to roll every loan forward (`contract/indexation`).

HM Land Registry publishes the UK HPI monthly as a CSV (the "full file"), by region and
local authority, back to 1995, under the Open Government Licence v3.0. Of its columns four
are read: `Date` (the month, day-first `01/01/2024` as published, or ISO `2024-01-01`),
`RegionName`, `AreaCode` (the ONS code, `E09000033`) and `Index` (January 2023 = 100). A
file without them, or a line whose date or index cannot be read, is unusable (65, naming
the line); an area and month given twice with two figures too.

The postcode directory is the ONS Postcode Directory's shape: one line a postcode, its
authority in a column of its own (`pcds` and `oslaua` by default). Postcodes are read in
their normal form (`postcodes.normalise`); one given twice keeps its first authority, and
the repeats are counted.

Either file is a local path, an `s3://` or `az://` URL, or an `https://` (or `http://`)
URL given with its sha256 (`index.sha256`, `index.postcodes_sha256`): what a server sends
is trusted for its hash alone, never for its address or its TLS, so a file fetched over
the web without one is refused (64). A file of any kind given with its sha256 is checked
against it (65 when it differs).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import polars as pl

from batchval._internal import postcodes
from batchval._internal.input.options import InputError
from batchval._internal.outcome import SettingsError
from batchval._internal.redaction import REDACTED, without_password

UKHPI_COLUMNS: tuple[str, ...] = ("Date", "RegionName", "AreaCode", "Index")
# The attribution the Open Government Licence asks of a user of the index (the report's).
UKHPI_ATTRIBUTION = (
    "Contains HM Land Registry data © Crown copyright and database right. This data is "
    "licensed under the Open Government Licence v3.0."
)
ONSPD_ATTRIBUTION = (
    "Contains OS data © Crown copyright and database right; Contains Royal Mail data © Royal "
    "Mail copyright and database right; Source: Office for National Statistics licensed under "
    "the Open Government Licence v3.0."
)
_DAY_FIRST = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})")
_ISO = re.compile(r"(\d{4})-(\d{2})(?:-(\d{2}))?")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# The schemes of a file fetched over the web, kept by its hash (`valuations/indexing`).
WEB_SCHEMES = ("https://", "http://")
# Each file's key, and the key of its sha256.
HASHED = {"file": "sha256", "postcodes": "postcodes_sha256"}


# `index.source`: none (the default), HM Land Registry's UK HPI file, or the API's own
# index, read from street analyses and held in the book (`valuations/api_index`).
INDEX_SOURCES: tuple[str, ...] = ("none", "ukhpi", "api")


@dataclasses.dataclass(frozen=True, slots=True)
class IndexOptions:
    """The config's `index` section: whether every loan is rolled forward by a house
    price index (`source`), from which file, and where postcodes find their authority;
    each file's sha256, when given (lower-case hex)."""

    source: str = "none"
    file: str | None = None  # a path, an s3:// or az:// URL, or an https:// URL with its hash
    postcodes: str | None = None  # a postcode directory (ONS Postcode Directory shape)
    postcode_column: str = "pcds"
    authority_column: str = "oslaua"
    sha256: str | None = None  # the file's
    postcodes_sha256: str | None = None  # the postcode directory's

    @property
    def on(self) -> bool:
        return self.source != "none"

    @classmethod
    def of(cls, section: Mapping[str, object]) -> IndexOptions:
        """The section's options (its keys checked by the settings); SettingsError (64)
        for a value of the wrong kind, a source without its file, a hash that is not 64
        hex digits or without its file, or a file at an http(s) URL without its hash."""
        given = {k: v for k, v in section.items() if v is not None}
        for name, value in given.items():
            if not isinstance(value, str) or not value.strip():
                raise SettingsError(f"index.{name} must be a text, not {value!r}")
        source = str(given.get("source", "none"))
        if source not in INDEX_SOURCES:
            raise SettingsError(
                f"index.source must be {' or '.join(INDEX_SOURCES)}, not {source!r}"
            )
        if source == "ukhpi" and "file" not in given:
            raise SettingsError(f"index.source {source} needs index.file: the index's file")
        if "file" in given and source != "ukhpi":
            raise SettingsError(
                f"index.file is given but index.source is {source}: say ukhpi for a file"
                + (
                    " (api reads the index from the API's street analyses)"
                    if source == "api"
                    else ""
                )
            )
        for name, hashed in HASHED.items():
            given = _hash_checked(given, name, hashed)
        return cls(**{k: str(v) for k, v in given.items()})

    def to_json(self) -> dict[str, str | None]:
        """The options for the manifest: a URL's password and query (a token) masked."""
        found = dataclasses.asdict(self)
        for name in HASHED:
            if found[name] is not None:
                found[name] = shown(found[name])
        return found


def _hash_checked(given: dict[str, object], name: str, hashed: str) -> dict[str, object]:
    """`given` with the hash of its file `name` in lower case; SettingsError (64) for a
    hash that is not one, a hash without its file, or a file at an http(s) URL without
    its hash (what the server sends is only trusted for it)."""
    digest = given.get(hashed)
    if digest is not None:
        digest = str(digest).strip().lower()
        if not _SHA256.fullmatch(digest):
            raise SettingsError(
                f"index.{hashed} must be a sha256 (64 hex digits, as `sha256sum FILE` "
                f"prints it), not {given[hashed]!r}"
            )
        if name not in given:
            raise SettingsError(f"index.{hashed} is given but index.{name} is not")
    place = str(given.get(name, ""))
    if digest is None and is_web(place):
        raise SettingsError(
            f"index.{name} {shown(place)} is at an http(s) URL, read only with its hash: "
            f"give index.{hashed} (--index-{hashed.replace('_', '-')}), the file's sha256 "
            "as `sha256sum FILE` prints it for a copy you trust"
        )
    return given if digest is None else {**given, hashed: digest}


def is_web(place: str) -> bool:
    """A file named by an https:// or http:// URL."""
    return place.lower().startswith(WEB_SCHEMES)


def shown(place: str) -> str:
    """A file's place as messages and the manifest say it: a URL's password and query
    string (which may hold a token, an Azure SAS's signature) masked."""
    if "://" not in place:
        return place
    try:
        scheme, netloc, path, query, _ = urlsplit(place)
    except ValueError:  # not a URL (`http://[oops`): all but its query, as given
        head, mark, _ = place.partition("?")
        return without_password(head + (mark and REDACTED))
    return without_password(urlunsplit((scheme, netloc, path, REDACTED if query else "", "")))


def month_number(year: int, month: int) -> int:
    """A month as one number (`year x 12 + month - 1`): months apart subtract."""
    return year * 12 + month - 1


def month_text(number: int) -> str:
    """`YYYY-MM` of a `month_number`."""
    return f"{number // 12:04d}-{number % 12 + 1:02d}"


def month_of(day: dt.date) -> int:
    return month_number(day.year, day.month)


def parse_month(text: str) -> int | None:
    """The month of a UK HPI `Date`: `01/03/2024` (day-first, as published), `2024-03-01`
    or `2024-03`; None for anything else."""
    text = text.strip()
    if found := _DAY_FIRST.fullmatch(text):
        day, month, year = (int(part) for part in found.groups())
    elif found := _ISO.fullmatch(text):
        year, month, day = int(found[1]), int(found[2]), int(found[3] or 1)
    else:
        return None
    try:
        dt.date(year, month, day)
    except ValueError:
        return None
    return month_number(year, month)


@dataclasses.dataclass(frozen=True, slots=True)
class HousePriceIndex:
    """The index of each area by month, as one file gave it."""

    levels: Mapping[str, Mapping[int, float]]  # area code -> month -> index
    names: Mapping[str, str]  # area code -> its RegionName
    sha256: str
    size: int  # bytes

    @property
    def latest(self) -> int | None:
        """The newest month of any area (None: an empty file)."""
        return max((max(months) for months in self.levels.values() if months), default=None)

    def latest_for(self, area: str) -> int | None:
        months = self.levels.get(area)
        return max(months) if months else None

    def first_for(self, area: str) -> int | None:
        months = self.levels.get(area)
        return min(months) if months else None

    def level(self, area: str, month: int) -> float | None:
        return self.levels.get(area, {}).get(month)

    def frame(self) -> pl.DataFrame:
        """The index as a table: `area`, `month` (`month_number`), `level`; with each
        area's `first` and `latest` month and its `latest_level` on every line."""
        areas, months, levels = [], [], []
        for area, by_month in self.levels.items():
            areas += [area] * len(by_month)
            months += list(by_month)
            levels += list(by_month.values())
        table = pl.DataFrame(
            {"area": areas, "month": months, "level": levels},
            schema={"area": pl.String, "month": pl.Int32, "level": pl.Float64},
        )
        ends = table.group_by("area").agg(
            first=pl.col("month").min(),
            latest=pl.col("month").max(),
            latest_level=pl.col("level").sort_by("month").last(),
        )
        return table.join(ends, on="area")

    def to_json(self) -> dict[str, object]:
        """What the manifest says of the file: its hash, size and newest month."""
        latest = self.latest
        return {
            "sha256": self.sha256,
            "bytes": self.size,
            "latest_month": None if latest is None else month_text(latest),
            "areas": len(self.levels),
        }


def read_ukhpi(path: Path, digest: tuple[str, int] | None = None) -> HousePriceIndex:
    """The UK HPI full file at `path` (InputError, 65, for a file that cannot be used);
    `digest`, its sha256 and size when the caller has them (else read here)."""
    sha256, size = digest or file_digest(path)
    try:
        header = pl.read_csv(path, infer_schema=False, n_rows=0).columns
        missing = [name for name in UKHPI_COLUMNS if name not in header]
        if missing:
            raise InputError(
                path, f"is not a UK HPI file: it has no column {', '.join(map(repr, missing))}"
            )
        frame = pl.read_csv(path, infer_schema=False, columns=list(UKHPI_COLUMNS))
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(path, f"is not a CSV file: {exc}") from None
    levels: dict[str, dict[int, float]] = {}
    names: dict[str, str] = {}
    rows = frame.select(UKHPI_COLUMNS).iter_rows()
    for line, (date, name, area, index) in enumerate(rows, start=2):
        month = parse_month(date or "")
        if month is None:
            raise InputError(path, f"line {line}: Date {date!r} is not a day of a month")
        level = _level(index)
        if level is None:
            raise InputError(path, f"line {line}: Index {index!r} is not a number above 0")
        code = (area or "").strip()
        if not code:
            raise InputError(path, f"line {line}: no AreaCode")
        months = levels.setdefault(code, {})
        if months.get(month, level) != level:
            raise InputError(
                path, f"line {line}: {code} {month_text(month)} is given twice, with two figures"
            )
        months[month] = level
        names.setdefault(code, (name or "").strip())
    return HousePriceIndex(levels, names, sha256, size)


def _level(text: str | None) -> float | None:
    try:
        level = float((text or "").strip())
    except ValueError:
        return None
    return level if level > 0 and level != float("inf") else None


@dataclasses.dataclass(frozen=True, slots=True)
class PostcodeAuthorities:
    """Each postcode's local authority code, from a postcode directory: a frame of two
    columns (`postcode` in normal form, `authority`), looked up by a join, since the
    directory holds 2.7 million postcodes."""

    frame: pl.DataFrame
    repeated: int  # postcodes given more than once (the first kept)
    sha256: str
    size: int

    def authorities(self, found: pl.Series) -> pl.Series:
        """The authority of each postcode of `found` (normal form), null where the
        directory has none, in `found`'s order."""
        asked = pl.DataFrame({"postcode": found.cast(pl.String)})
        return asked.join(self.frame, on="postcode", how="left", maintain_order="left")["authority"]


def read_postcode_directory(
    path: Path,
    postcode_column: str = "pcds",
    authority_column: str = "oslaua",
    digest: tuple[str, int] | None = None,
) -> PostcodeAuthorities:
    """The postcode directory at `path`, its two columns only (InputError, 65, without
    them), read as a stream: a directory's other fifty columns never reach memory.
    `digest`, its sha256 and size when the caller has them (else read here)."""
    sha256, size = digest or file_digest(path)
    try:
        header = pl.read_csv(path, infer_schema=False, n_rows=0).columns
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(path, f"is not a CSV file: {exc}") from None
    missing = [c for c in (postcode_column, authority_column) if c not in header]
    if missing:
        raise InputError(
            path, f"is not a postcode directory: it has no column {', '.join(map(repr, missing))}"
        )
    compact = pl.col(postcode_column).str.replace_all(r"\s", "").str.to_uppercase()
    frame = (
        pl.scan_csv(path, infer_schema=False)
        .select(
            postcode=pl.concat_str(compact.str.head(-3), pl.lit(" "), compact.str.tail(3)),
            authority=pl.col(authority_column).str.strip_chars(),
            shaped=compact.str.contains(postcodes.SHAPE_PATTERN),
        )
        .filter(pl.col("shaped") & (pl.col("authority").str.len_chars() > 0))
        .drop("shaped")
        .collect()
    )
    kept = frame.unique(subset="postcode", keep="first", maintain_order=True)
    return PostcodeAuthorities(kept, frame.height - kept.height, sha256, size)


def file_digest(path: Path) -> tuple[str, int]:
    """The sha256 and size of the file at `path`, read in chunks."""
    digest, size = hashlib.sha256(), 0
    try:
        with path.open("rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise InputError(path, f"cannot be read: {exc.strerror or exc}") from None
    return digest.hexdigest(), size
