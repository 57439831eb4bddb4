"""Columns that hold a person's data, or the lender's own internal data, which batchval
never needs and does not copy.

A lender's extract carries, beside each home and loan, the borrower: a name, a birth date,
an e-mail address, a telephone number, an NI number, the lines of an address. Nothing a
valuation or a lender figure is made from needs any of them, and every copy (results,
problems, exports, the checkpoint) is one more place a data-protection officer must
account for. So the default pass-through (no `input.passthrough` in the config) leaves
them out and says which, and `batchval init` proposes a pass-through list without them.
A column listed under `input.passthrough` is copied all the same: that is the user's
choice, stated.

A column is recognised:

- **by its name** (`by_name`), compared on its words, whatever the case and whether
  spaces, `_`, `-` or a change of case (`firstName`) separate them, short forms read out
  (`Cust_Nm`, `Brwr Fnm`: `SHORT_FORMS`):
  - a person's name: `Surname`, `Forename(s)`, `First Name`, `Last Name`, `Full Name`,
    `Given Name`, `Middle Name`, `Maiden Name`, `Initials`; `Name` alone; a name of a
    person's role (`Borrower Name`, `Customer Name`, `Applicant 2 Name`, `Account Holder
    Name`, `Account Name`, `Contact Name`) and a role alone (`Borrower`, `Borrower 1`). A
    name of a thing stays (`Loan Name`, `Product Name`, `Branch Name`, `Scheme Name`);
  - a birth date: `Date of Birth`, `DOB`, `Birth Date`, `Birthdate`, `Year of Birth`;
  - e-mail: `Email`, `E-mail`, `Email Address`;
  - a telephone: `Phone`, `Telephone`, `Tel`, `Mobile`, `Landline`, `Contact Number`;
  - an NI number: `NI Number`, `NI No`, `NINO`, `National Insurance Number`;
  - an address line: any name with `Address` or `Addr` in it (`Address 1`, `Address Line
    2`, `Security Address 1`, `Correspondence Address`), `Street`, `House Number`,
    `House Name`, `Flat Number`.

  A yes/no about a channel is not the person's data: an e-mail or telephone name that
  also says `Flag`, `Indicator`, `Consent`, `Opt`, `Preference`, `Banking`, `Verified`
  or `Type` (`Telephone Banking Flag`, `Email Opt In`) stays, and so does `Mobile Home`
  (a kind of home). A name that says `Postcode` (or `Post Code`), `Town`, `City`,
  `County` or `Country` stays even with `Address` in it: the postcode is what a
  valuation is made from, and a town names no one.
- **by its values** (`by_values`), on the first rows of the file (`SAMPLE_ROWS`): a
  column more than half of whose non-empty values are e-mail addresses, UK telephone
  numbers (`07700 900123`, `+44 (0)20 7946 0000`, `0161-496-0000`: 10 or 11 digits from
  the leading 0) or NI numbers (`QQ 12 34 56 C`). A column of 11-digit codes that all
  begin with a 0 reads as telephone numbers: list it under `input.passthrough` to keep it.

By the same rule, a column the lender did not mean to pass on (`internal_columns`):

- **hidden in the workbook** (its column hidden in the sheet; `input/excel.hidden_parts`);
- **marked internal** by its name: `internal`, `confidential`, `not for distribution`,
  `restricted` among its words (`Internal Score`, `Risk Grade (Confidential)`);
- **long free text**: a column whose median non-empty value in the first rows is over
  40 characters (notes, comments, call logs), where names, addresses and reasons hide.

The columns a run uses are never left out: the request fields (the postcode among them)
and the lender columns (the loan id, balances, valuations, dates), passed as `kept`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

import polars as pl

# Rows of the file whose values are looked at: enough for a share, cheap to read.
SAMPLE_ROWS = 1000
# The share of a column's non-empty sampled values that must have a shape.
_MOST = 0.5

# Why a column is left out, as summary.json and the terminal say it.
BY_NAME = "by name"
EMAILS = "holds e-mail addresses"
PHONES = "holds UK telephone numbers"
NI_NUMBERS = "holds NI numbers"
HIDDEN = "hidden in the workbook"
INTERNAL = "marked internal by its name"
LONG_TEXT = "long free text"
PERSONAL_REASONS = frozenset({BY_NAME, EMAILS, PHONES, NI_NUMBERS})
# A median non-empty value longer than this is free text (`LONG_TEXT`).
LONG_TEXT_CHARS = 40
_INTERNAL = re.compile(
    r"\b(?:internal|confidential|restricted|not[\s_\-]+for[\s_\-]+distribution)\b", re.IGNORECASE
)

# Words that name a person's name by themselves (`Surname`, `firstname` written as one).
_NAME_WORDS = frozenset(
    {
        "surname",
        "surnames",
        "forename",
        "forenames",
        "firstname",
        "lastname",
        "fullname",
        "givenname",
        "middlename",
        "maidenname",
        "familyname",
        "christianname",
        "initials",
    }
)
# Words that, beside `name`, make it a person's (`Loan Name` is a thing's); a header of
# one of the roles alone, or with a number (`Borrower 2`), holds a name too.
_ROLES = frozenset(
    {
        "borrower",
        "borrowers",
        "customer",
        "customers",
        "applicant",
        "applicants",
        "client",
        "holder",
        "guarantor",
        "tenant",
        "occupier",
        "mortgagor",
        "member",
        "person",
    }
)
# Words that may stand before a role (`Joint Borrower`, `Second Applicant`).
_ROLE_ORDER = frozenset({"joint", "main", "lead", "primary", "secondary", "first", "second"})
_NAME_QUALIFIERS = (
    _ROLES
    | _ROLE_ORDER
    | frozenset({"last", "full", "given", "middle", "maiden", "family", "christian"})
    | frozenset({"sur", "fore", "account", "contact", "owner"})
)
_PHONE_WORDS = frozenset({"phone", "telephone", "tel", "telno", "phoneno", "mobile", "landline"})
_PHONE_JOINED = frozenset(
    {"contactnumber", "contactno", "phonenumber", "telephonenumber", "mobilenumber"}
)
# Beside an e-mail or telephone word: a flag about the channel, not the number or address.
_CHANNEL_FLAGS = frozenset(
    {
        "flag",
        "indicator",
        "ind",
        "consent",
        "opt",
        "optin",
        "optout",
        "preference",
        "preferences",
        "preferred",
        "banking",
        "verified",
        "valid",
        "type",
        "yn",
    }
)
# In a name with `address`: a part of an address that names no one.
_PLACE_WORDS = frozenset({"postcode", "postal", "town", "city", "county", "country", "region"})

_EMAIL = r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$"
# After spaces, hyphens, dots and brackets are dropped: +44, 0044 or 0, then 9 or 10
# digits, the first not a 0 (`(0)` after +44 is written, and dropped here).
_PHONE = r"^(?:(?:\+44|0044)0?|0)[1-9]\d{8,9}$"
_PHONE_PUNCTUATION = r"[\s\-.()]"
# Two letters, six digits, a letter A to D. HMRC never issues some prefixes (QQ among
# them), but its own examples and many test files use them: the shape is enough.
_NI_NUMBER = r"^[A-Z]{2}\d{6}[A-D]$"


# The short forms of MI packs' headings for a person's data, read as the words they
# shorten (`Cust_Nm` is `customer name`, `Brwr Fnm` `borrower forename`).
SHORT_FORMS: Mapping[str, str] = {
    "nm": "name",
    "nme": "name",
    "cust": "customer",
    "cus": "customer",
    "brwr": "borrower",
    "bwr": "borrower",
    "appl": "applicant",
    "fnm": "forename",
    "fname": "forename",
    "snm": "surname",
    "sname": "surname",
    "lname": "lastname",
    "eml": "email",
    "mob": "mobile",
    "ph": "phone",
}


def header_words(name: str) -> tuple[str, ...]:
    """A header's words in lower case, short forms read out (`SHORT_FORMS`): `Security
    Address 1`, `security_address1` and `securityAddress1` are all (`security`,
    `address`, `1`), and `Cust_Nm` is (`customer`, `name`)."""
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name)
    spaced = re.sub(r"(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])", " ", spaced)
    words = (w for w in re.split(r"[^0-9a-z]+", spaced.lower()) if w)
    return tuple(SHORT_FORMS.get(w, w) for w in words)


def _is_postcode(words: Sequence[str]) -> bool:
    joined = "".join(words)
    return "postcode" in joined or "postalcode" in joined or "zip" in words


def _names_a_person(words: Sequence[str]) -> bool:
    if any(w in _NAME_WORDS for w in words) or "".join(words) in _NAME_WORDS:
        return True
    if "name" in words or "names" in words:
        others = [w for w in words if w not in ("name", "names") and not w.isdigit()]
        return not others or any(w in _NAME_QUALIFIERS for w in others)
    roles = [w for w in words if w in _ROLES]
    return bool(roles) and all(w in _ROLES or w in _ROLE_ORDER or w.isdigit() for w in words)


def _birth(words: Sequence[str]) -> bool:
    joined = "".join(words)
    return "dob" in words or "birth" in words or "birth" in joined or joined == "dob"


def _email(words: Sequence[str]) -> bool:
    joined = "".join(words)
    return "email" in joined and not any(w in _CHANNEL_FLAGS for w in words)


def _phone(words: Sequence[str]) -> bool:
    found = [w for w in words if w in _PHONE_WORDS]
    joined = "".join(words)
    if not found and not any(j in joined for j in _PHONE_JOINED):
        return False
    if found == ["mobile"] and "home" in words:  # a mobile home is a kind of home
        return False
    return not any(w in _CHANNEL_FLAGS for w in words)


def _ni_number(words: Sequence[str]) -> bool:
    joined = "".join(words)
    if "nino" in words or "nationalinsurance" in joined:
        return True
    return "ni" in words and any(w in ("number", "no", "num", "nbr") for w in words)


def _address(words: Sequence[str]) -> bool:
    if any(w in _PLACE_WORDS for w in words) or ("post" in words and "code" in words):
        return False
    if any(w.startswith("address") or w in ("addr", "street") for w in words):
        return True
    return any(w in ("house", "flat") for w in words) and any(
        w in ("number", "no", "name") for w in words
    )


def by_name(header: str) -> bool:
    """Whether a header names a person's data (see the module's docstring)."""
    words = header_words(header)
    if not words or _is_postcode(words):
        return False
    return any(
        rule(words) for rule in (_names_a_person, _birth, _email, _phone, _ni_number, _address)
    )


def _filled(sample: pl.DataFrame, name: str) -> pl.Series:
    """A column's values that hold something, as text, stripped (by name: a column may be
    called "*" or "^a$", polars patterns, so it is renamed before any expression)."""
    text = sample.get_column(name).alias("value").cast(pl.String).str.strip_chars()
    return text.filter(text.is_not_null() & (text != ""))


def by_values(sample: pl.DataFrame, names: Sequence[str] | None = None) -> dict[str, str]:
    """Column -> why, for the columns of `sample` (the first rows, as text; only `names`,
    when given) more than half of whose non-empty values are e-mail addresses, UK
    telephone numbers or NI numbers."""
    found: dict[str, str] = {}
    # By name, one at a time: a column may be called "*" or "^a$" (polars patterns).
    for name in sample.columns if names is None else names:
        text = _filled(sample, name)
        if text.len() == 0:
            continue
        shapes = (
            (EMAILS, text.str.contains(_EMAIL)),
            (PHONES, text.str.replace_all(_PHONE_PUNCTUATION, "").str.contains(_PHONE)),
            (
                NI_NUMBERS,
                text.str.replace_all(r"\s", "").str.to_uppercase().str.contains(_NI_NUMBER),
            ),
        )
        for why, fits in shapes:
            if fits.sum() > _MOST * text.len():
                found[name] = why
                break
    return found


def personal_columns(
    columns: Sequence[str],
    sample: pl.DataFrame | None,
    kept: Collection[str] = (),
    hidden: Collection[str] = (),
) -> dict[str, str]:
    """Column -> why it is left out, in the order of `columns`, for the columns not
    `kept` (the request fields and lender columns): a person's data by name, marked
    internal by its name, `hidden` in the workbook, then by the values of `sample` (the
    file's first rows as text; None: by name only): a person's data, or long free text."""
    found: dict[str, str] = {}
    for column in columns:
        why = None if column in kept else by_heading(column, hidden)
        if why is not None:
            found[column] = why
    looked = [c for c in columns if c not in kept and c not in found]
    if sample is not None:
        present = [c for c in looked if c in sample.columns]
        found.update(by_values(sample, present))
        found.update(long_text(sample, [c for c in present if c not in found]))
    return {c: found[c] for c in columns if c in found}


def by_heading(column: str, hidden: Collection[str] = ()) -> str | None:
    """Why a column is left out by its heading alone (a person's data by name, marked
    internal) or by being `hidden` in the workbook; None when neither says so."""
    if by_name(column):
        return BY_NAME
    if _INTERNAL.search(column.replace("_", " ")):
        return INTERNAL
    if column in hidden:
        return HIDDEN
    return None


def long_text(sample: pl.DataFrame, names: Sequence[str]) -> dict[str, str]:
    """Column -> `LONG_TEXT` for those of `names` whose median non-empty value in `sample`
    is longer than `LONG_TEXT_CHARS` characters."""
    found: dict[str, str] = {}
    for name in names:
        lengths = _filled(sample, name).str.len_chars()
        median = lengths.median() if lengths.len() else None
        if isinstance(median, int | float) and median > LONG_TEXT_CHARS:
            found[name] = LONG_TEXT
    return found


def left_out_line(left_out: Mapping[str, str]) -> str:
    """`left out as personal data: A, B (by name); C (holds e-mail addresses); left out
    as internal: D (hidden in the workbook); input.passthrough ...`: the columns grouped
    by why (`left_out_words`), for the terminal and the docs; empty for none."""
    if not left_out:
        return ""
    return f"{left_out_words(left_out)}; input.passthrough lists a column to keep it"


def left_out_words(left_out: Mapping[str, str]) -> str:
    """The columns left out, grouped: a person's data, then the lender's internal data."""
    said = []
    for kind, reasons in (("personal data", True), ("internal", False)):
        grouped: dict[str, list[str]] = {}
        for column, why in left_out.items():
            if (why in PERSONAL_REASONS) is reasons:
                grouped.setdefault(why, []).append(column)
        if grouped:
            listed = "; ".join(f"{', '.join(names)} ({why})" for why, names in grouped.items())
            said.append(f"left out as {kind}: {listed}")
    return "; ".join(said)
