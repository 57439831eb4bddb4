"""What the caller says about its input, and what it hears when the input is unusable.

The vocabulary of a ValuationRequest (docs/api.md, section 3) lives here too,
because the options are checked against it: a column mapped to a field the API does
not have, or a value mapped to a code it does not accept, is a mistake in the config
and is refused when the options are built (`ValueError`, exit 64 at the command
line), long before the first row is read.
"""

from __future__ import annotations

import codecs
import dataclasses
import re
import types
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from batchval._internal.api import (
    BUILT_FORMS,
    INCLUDE_ITEMS,
    PROPERTY_TYPES,
    REQUEST_FIELDS,
    WALLS_ENERGY_EFFICIENCY,
)
from batchval._internal.input.lender import LENDER_FIELDS
from batchval._internal.outcome import BatchvalError, SettingsError

# The fields a row of the input may give: every request field, and `include`, the
# extras that row asks for in place of the run's. A row's problems are reported in
# this order.
ROW_FIELDS: tuple[str, ...] = (*REQUEST_FIELDS, "include")

# The codes each enumerated field accepts, in the API document's order (that order is
# shown to people in problem details).
ENUM_VALUES: Mapping[str, tuple[str, ...]] = types.MappingProxyType(
    {
        "propertyType": PROPERTY_TYPES,
        "builtForm": BUILT_FORMS,
        "wallsEnergyEfficiency": WALLS_ENERGY_EFFICIENCY,
    }
)

DETECTED_DELIMITERS: tuple[str, ...] = (",", ";", "\t", "|")

# The text every CSV encoding must write as ASCII does: the reader finds the header's
# line break, quotes and delimiter in the bytes (UTF-16 and UTF-32 are refused).
_ASCII_PROBE = "\t\n\r ,;|\"'0Az~"


@dataclasses.dataclass(frozen=True, slots=True)
class Corrections:
    """`input.not_loans`: lines or patterns (regular expressions, searched in a row's label
    or first value whatever its case) that are set aside, or kept as loans, whatever the
    rules say. `keep` wins over `set_aside`."""

    set_aside: tuple[int | str, ...] = ()
    keep: tuple[int | str, ...] = ()

    def __post_init__(self) -> None:
        for which in ("set_aside", "keep"):
            for item in getattr(self, which):
                if isinstance(item, bool) or not isinstance(item, int | str):
                    raise ValueError(f"not_loans.{which}: {item!r} is not a line or a pattern")
                if isinstance(item, int) and item < 1:
                    raise ValueError(f"not_loans.{which}: {item} is not a line number")
                if isinstance(item, str):
                    try:
                        re.compile(item)
                    except re.error as exc:
                        raise ValueError(
                            f"not_loans.{which}: {item!r} is not a regular expression: {exc}"
                        ) from None

    def __bool__(self) -> bool:
        return bool(self.set_aside or self.keep)

    @classmethod
    def of(cls, section: object) -> Corrections:
        """From the config's `input.not_loans` (None: none); ValueError when it is not
        `{set_aside: [...], keep: [...]}`, each a list of lines and patterns."""
        if section is None:
            return cls()
        if not isinstance(section, Mapping):
            raise ValueError("not_loans must be {set_aside: [...], keep: [...]}")
        unknown = sorted(set(map(str, section)) - {"set_aside", "keep"})
        if unknown:
            raise ValueError(f"not_loans takes keep, set_aside, not {', '.join(unknown)}")
        lists = {which: section.get(which) or [] for which in ("set_aside", "keep")}
        for which, items in lists.items():
            if not isinstance(items, list):
                raise ValueError(f"not_loans.{which} must be a list of lines and patterns")
        return cls(tuple(lists["set_aside"]), tuple(lists["keep"]))

    def to_json(self) -> dict[str, list[int | str]]:
        return {"set_aside": list(self.set_aside), "keep": list(self.keep)}


class InputError(BatchvalError):
    """The input file cannot be used (exit 65): a person has to fix the file.

    `str()` is one line naming the file and the fault, fit to print as it is.
    """

    def __init__(self, path: Path, fault: str) -> None:
        super().__init__(path, fault)
        self.path = path
        # Faults may quote other libraries' messages; keep the promise of one line.
        self.fault = " ".join(fault.split())

    def __str__(self) -> str:
        return f"{self.path}: {self.fault}"


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return types.MappingProxyType(dict(mapping))


@dataclasses.dataclass(frozen=True, slots=True)
class InputOptions:
    """How to read one input file and turn its columns into request fields.

    columns: API field name -> input column name, for columns not named as the field
        (`propertyType` and `property_type` are recognised without it). `include` may be
        mapped too: a column of per-row extras (`commentary;rebuildCost`); and so may the
        lender columns (`input/lender`), which stay pass-through columns.
    values: API field -> {the input's code: the API's value}, e.g.
        `{"propertyType": {"S": "semi_detached"}}`; codes match whatever their case,
        surrounding spaces and Unicode normal form. Not for `include`: its items are
        the API's own words.
    passthrough: the input columns copied to the outputs; None means every column that
        is not used for a request field (the include column is one).
    include: extras asked for on every request whose row names none of its own
        (`commentary`, `rebuildCost`). An item the API does not know is reported on each
        such row as `invalid_include`, as the API would refuse each request; the command
        line should refuse it first.
    """

    delimiter: str | None = None  # None: detected from the header among , ; tab |
    # A CSV's encoding, any Python codec that writes ASCII as ASCII ("utf-8", with or
    # without BOM, "cp1252", "latin-1", "iso-8859-15", ...); None: found from the file's
    # bytes, UTF-8 or else cp1252 (`sniff.detect_encoding`). Not for Parquet or Excel.
    encoding: str | None = None
    # The workbook's sheet to read (an Excel input only); None: its first sheet.
    sheet: str | None = None
    # The 1-based line of a CSV file or a sheet that holds the header (the lines above it
    # are a banner, not read); None: found (`input/layout`). Not for Parquet.
    header_row: int | None = None
    columns: Mapping[str, str] = dataclasses.field(default_factory=dict)
    values: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    passthrough: tuple[str, ...] | None = None
    include: tuple[str, ...] = ()
    batch_rows: int = 50_000
    # Rows set aside as not loans, or kept as loans, whatever the rules say (input/layout).
    not_loans: Corrections = Corrections()

    def __post_init__(self) -> None:
        if self.delimiter is not None and (len(self.delimiter) != 1 or self.delimiter in '"\r\n'):
            raise ValueError(f"delimiter must be one character, not {self.delimiter!r}")
        if self.encoding is not None:
            _check_encoding(self.encoding)
        if self.sheet is not None and not self.sheet:
            raise ValueError("sheet must name a sheet of the workbook")
        if self.header_row is not None and (
            isinstance(self.header_row, bool)
            or not isinstance(self.header_row, int)
            or self.header_row < 1
        ):
            raise ValueError(f"header_row must be a line number from 1, not {self.header_row!r}")
        if self.batch_rows < 1:
            raise ValueError(f"batch_rows must be at least 1, not {self.batch_rows}")
        for field in self.columns:
            if field not in ROW_FIELDS and field not in LENDER_FIELDS:
                raise ValueError(
                    f"{field!r} is not a request field; use one of {', '.join(ROW_FIELDS)}"
                    f" (or a lender column: {', '.join(LENDER_FIELDS)})"
                )
        for field in self.values:
            if field == "include":
                raise ValueError(
                    "values cannot translate include items; write them as the API does: "
                    + ", ".join(INCLUDE_ITEMS)
                )
            if field not in REQUEST_FIELDS:
                raise ValueError(
                    f"{field!r} is not a request field; use one of {', '.join(REQUEST_FIELDS)}"
                )
        for field, codes in self.values.items():
            _check_codes(field, codes)
        # Frozen all the way down: options are shared by every batch of a run.
        object.__setattr__(self, "columns", _frozen(self.columns))
        object.__setattr__(
            self,
            "values",
            types.MappingProxyType({f: _frozen(codes) for f, codes in self.values.items()}),
        )
        object.__setattr__(self, "include", tuple(self.include))
        if self.passthrough is not None:
            object.__setattr__(self, "passthrough", tuple(self.passthrough))

    @classmethod
    def of(
        cls,
        section: Mapping[str, Any],
        include: tuple[str, ...],
        reading: Mapping[str, str | int | None],
    ) -> InputOptions:
        """The options of the config's `input` section (its keys checked by the settings),
        with `reading` (the command line's --encoding, --sheet and --header-row) over its
        own; SettingsError (64) for a value of the wrong kind."""
        columns = section.get("columns") or {}
        values = section.get("values") or {}
        if not isinstance(columns, Mapping) or not all(
            isinstance(v, str) for v in columns.values()
        ):
            raise SettingsError("input.columns must map API field names to column names")
        if not isinstance(values, Mapping) or not all(
            isinstance(v, Mapping) for v in values.values()
        ):
            raise SettingsError("input.values must map API field names to {your value: API value}")
        passthrough = section.get("passthrough")
        if passthrough is not None and (
            not isinstance(passthrough, list) or not all(isinstance(c, str) for c in passthrough)
        ):
            raise SettingsError("input.passthrough must be a list of column names")
        delimiter = section.get("delimiter")
        if delimiter is not None and (not isinstance(delimiter, str) or len(delimiter) != 1):
            raise SettingsError("input.delimiter must be a single character")
        for name in ("encoding", "sheet"):
            if section.get(name) is not None and not isinstance(section[name], str):
                raise SettingsError(f"input.{name} must be a name")
        header_row = section.get("header_row")
        if header_row is not None and (
            isinstance(header_row, bool) or not isinstance(header_row, int) or header_row < 1
        ):
            raise SettingsError("input.header_row must be a line number, 1 or more")
        given = {**section, **{name: value for name, value in reading.items() if value is not None}}
        try:
            return cls(
                delimiter=delimiter,
                encoding=given.get("encoding"),
                sheet=given.get("sheet"),
                header_row=given.get("header_row"),
                columns={str(k): v for k, v in columns.items()},
                values={str(f): {str(k): str(v) for k, v in m.items()} for f, m in values.items()},
                passthrough=None if passthrough is None else tuple(passthrough),
                include=include,
                batch_rows=int(given.get("batch_rows", 50_000)),
                not_loans=Corrections.of(given.get("not_loans")),
            )
        except (ValueError, TypeError) as exc:
            raise SettingsError(f"input: {exc}") from None

    def to_json(self) -> dict[str, Any]:
        """The options as plain JSON, for the run's manifest."""
        return {
            "delimiter": self.delimiter,
            "encoding": self.encoding,
            "sheet": self.sheet,
            "header_row": self.header_row,
            "columns": dict(self.columns),
            "values": {k: dict(v) for k, v in self.values.items()},
            "passthrough": None if self.passthrough is None else list(self.passthrough),
            "batch_rows": self.batch_rows,
            "not_loans": self.not_loans.to_json(),
        }

    @property
    def codec(self) -> str | None:
        """The Python codec a CSV is decoded with (`utf-8` also accepts a BOM); None when
        it is to be found from the file's bytes."""
        if self.encoding is None:
            return None
        name = codecs.lookup(self.encoding).name
        return "utf-8" if name.startswith("utf-8") else name


def _check_encoding(encoding: str) -> None:
    """A codec Python knows, that reads text, and that writes ASCII as ASCII."""
    try:
        info = codecs.lookup(encoding)
        name = "utf-8" if info.name.startswith("utf-8") else info.name  # no BOM to probe
        ascii_safe = _ASCII_PROBE.encode(name) == _ASCII_PROBE.encode("ascii")
    except (LookupError, UnicodeError, TypeError):
        info, ascii_safe = None, False
    if info is None or not getattr(info, "_is_text_encoding", True):
        raise ValueError(
            f"unknown encoding {encoding!r}; name a text encoding such as utf-8, cp1252 "
            "(Excel on Windows), latin-1 or iso-8859-15"
        )
    if not ascii_safe:
        raise ValueError(
            f"encoding {encoding!r} does not write plain letters and commas as ASCII does "
            "(UTF-16 or UTF-32?); save the file as UTF-8"
        )


def normal_code(code: str) -> str:
    """How a code in `values` is compared with the input's text (mapping.code_key)."""
    return unicodedata.normalize("NFC", code).strip().lower()


def _check_codes(field: str, codes: Mapping[str, str]) -> None:
    """A value map must be unambiguous and, for an enumerated field, land on API codes."""
    seen: dict[str, tuple[str, str]] = {}
    for code, value in codes.items():
        key = normal_code(code)
        if key in seen and seen[key][1] != value:
            first, mapped = seen[key]
            raise ValueError(
                f"values for {field}: {first!r} and {code!r} differ only in case, spaces "
                f"or Unicode form but map to {mapped!r} and {value!r}"
            )
        seen[key] = (code, value)
        allowed = ENUM_VALUES.get(field)
        if allowed is not None and value not in allowed:
            raise ValueError(
                f"values for {field}: {code!r} maps to {value!r}, "
                f"which is not one of {', '.join(allowed)}"
            )
