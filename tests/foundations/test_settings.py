"""Settings from the config file, the environment and the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from batchval._internal.outcome import SettingsError
from batchval._internal.redaction import Redactor
from batchval._internal.settings import API_KEYS, STORAGE, env_redactor, load_settings

API_ENV = {
    "BATCHVAL_BASE_URL": "https://api.example/partners/v1",
    "BATCHVAL_AUTH_URL": "https://api.example",
    "BATCHVAL_CLIENT_ID": "lender",
    "BATCHVAL_CLIENT_SECRET": "s3cret-from-env",
}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_no_api_means_the_embedded_sandbox() -> None:
    """With no API configured at all, settings carry no API (the embedded sandbox)."""
    settings = load_settings(None, {})
    assert settings.api is None
    assert settings.run.concurrency == 8


def test_environment_configures_the_api_and_hides_the_secret() -> None:
    """BATCHVAL_* variables configure the API; the secret is not in the repr."""
    settings = load_settings(None, API_ENV)
    assert settings.api is not None
    assert settings.api.client_id == "lender"
    assert "s3cret-from-env" not in repr(settings)


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    """The environment wins over the config file."""
    config = write(
        tmp_path,
        "api: {base_url: http://file/partners/v1, auth_url: http://file,"
        " client_id: file-id, client_secret: file-secret}\n",
    )
    settings = load_settings(config, {"BATCHVAL_CLIENT_ID": "env-id"})
    assert settings.api is not None
    assert (settings.api.client_id, settings.api.base_url) == ("env-id", "http://file/partners/v1")


def test_partial_api_is_an_error() -> None:
    """Some but not all API settings is refused, naming what is missing."""
    with pytest.raises(SettingsError, match="BATCHVAL_CLIENT_SECRET"):
        load_settings(None, {k: v for k, v in API_ENV.items() if "SECRET" not in k})


@pytest.mark.parametrize(
    "url",
    ["api.example/partners/v1", "ftp://api.example/partners/v1", "https://", "  "],
    ids=["no-scheme", "ftp", "no-host", "blank"],
)
def test_api_urls_must_be_http_urls(url: str) -> None:
    """A base URL that is not an http(s) URL with a host is refused (exit 64)."""
    with pytest.raises(SettingsError, match="BATCHVAL_BASE_URL"):
        load_settings(None, {**API_ENV, "BATCHVAL_BASE_URL": url})


def test_command_line_overrides_the_run_section(tmp_path: Path) -> None:
    """--concurrency, --include and --max-credits win over the file."""
    config = write(tmp_path, "run: {concurrency: 2, include: [commentary], max_credits: 50}\n")
    settings = load_settings(config, {}, concurrency=5, include="rebuildCost", max_credits=100)
    assert settings.run.concurrency == 5
    assert settings.input.include == ("rebuildCost",)
    assert settings.run.max_credits == 100
    from_file = load_settings(config, {})
    assert from_file.input.include == ("commentary",)
    assert from_file.run.max_credits == 50


@pytest.mark.parametrize("where", ["config", "environment"])
def test_a_key_is_masked_exactly_when_it_is_marked_secret(tmp_path: Path, where: str) -> None:
    """Every API and storage key marked `secret=True` (the reference's `never printed,
    logged or written` is drawn from the mark) has its value masked by the redactor, given
    in the config file or the environment, and no other key has: mark and masking agree."""
    tables = {"api": API_KEYS, "storage": STORAGE}
    keys = [(section, key) for section, table in tables.items() for key in table]
    value = {(s, k.name): f"https://value-of-{k.name.replace('_', '-')}.example" for s, k in keys}
    env: dict[str, str] = {}
    if where == "config":
        sections = {s: {k.name: value[s, k.name] for k in table} for s, table in tables.items()}
        settings = load_settings(write(tmp_path, yaml.safe_dump(sections)), env)
    else:
        env = {str(k.variable): value[s, k.name] for s, k in keys}
        settings = load_settings(None, env)
    redactor = Redactor()
    for secret, user in settings.secrets(env):  # as the command line hides them
        redactor.add(secret, user=user)
    redactors = [redactor] + ([env_redactor(env)] if where == "environment" else [])
    marked = {(s, k.name) for s, k in keys if k.secret}
    # Unmarking a key unmasks it: the list of secrets is held here too.
    assert sorted(name for _, name in marked) == [
        "account_key",
        "client_secret",
        "connection_string",
        "sas_token",
        "secret_access_key",
        "session_token",
    ]
    for each in redactors:
        masked = {at for at, text in value.items() if text not in each.scrub(f"<{text}>")}
        assert masked == marked


def test_the_reference_says_a_key_is_never_shown_exactly_when_it_is_marked_secret() -> None:
    """The configuration reference's words for a key (`Key.described`) say it is never
    shown for a key marked `secret`, and for no other."""
    for key in (*API_KEYS, *STORAGE):
        assert ("never printed, logged or written" in key.described) == key.secret, key.name


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("colour: red\n", "unknown setting"),
        ("run: {concurency: 3}\n", "unknown setting"),
        ("run: {include: [photos]}\n", "unknown item"),
        ("run: {max_attempts: 0}\n", "max_attempts"),
        ("run: {outage_seconds: -1}\n", "outage_seconds"),
        ("input: {delimiter: ';;'}\n", "delimiter"),
        ("input: {columns: {colour: Colour}}\n", "not a request field"),
        ("input: {values: {propertyType: {C: castle}}}\n", "castle"),
        ("input: {encoding: ebcdic}\n", "encoding"),
        ("api: [1, 2]\n", "mapping"),
        ("- just\n- a list\n", "mapping"),
        ("run: {concurrency: 2\n", "not valid YAML"),
    ],
)
def test_bad_config_is_refused(tmp_path: Path, text: str, message: str) -> None:
    """Each mistake in a config file is a SettingsError naming it (exit 64)."""
    with pytest.raises(SettingsError, match=message):
        load_settings(write(tmp_path, text), {})


@pytest.mark.parametrize(
    "text",
    [
        "api:\n  client_id: me\n  client_secret: s3cr3t: more\n",
        'api:\n  client_id: me\n  client_secret: "s3cr3t\n  base_url: [\n',
        "api:\n  client_id: me\n\tclient_secret: s3cr3t\n",
    ],
)
def test_a_yaml_error_names_file_line_and_column_never_the_line(tmp_path: Path, text: str) -> None:
    """A YAML syntax error says the file, line and column, and never quotes the line
    (which may be the one that holds the client secret)."""
    with pytest.raises(SettingsError) as refused:
        load_settings(write(tmp_path, text), {})
    said = str(refused.value)
    assert re.search(r"not valid YAML at line \d+, column \d+", said), said
    assert str(tmp_path) in said
    assert "s3cr3t" not in said


def test_missing_config_file(tmp_path: Path) -> None:
    """A config path that does not exist is a SettingsError."""
    with pytest.raises(SettingsError, match="cannot read"):
        load_settings(tmp_path / "nope.yaml", {})


def test_fingerprint_follows_what_shapes_requests(tmp_path: Path) -> None:
    """Include and mapping change the fingerprint; concurrency does not."""
    base = load_settings(None, {})
    assert base.fingerprint() == load_settings(None, {}, concurrency=3).fingerprint()
    assert base.fingerprint() != load_settings(None, {}, include="commentary").fingerprint()
    mapped = load_settings(write(tmp_path, "input: {columns: {postcode: PC}}\n"), {})
    assert base.fingerprint() != mapped.fingerprint()


@pytest.mark.parametrize(
    "section",
    [
        "{encoding: latin-1}",
        "{encoding: cp1252}",
        "{delimiter: ';'}",
        "{delimiter: '|'}",
        "{passthrough: []}",
        "{passthrough: [loan_id]}",
        "{passthrough: [loan_id, branch]}",
        "{columns: {include: extras}}",
    ],
)
def test_fingerprint_follows_how_the_input_is_read(tmp_path: Path, section: str) -> None:
    """Input encoding, delimiter, passthrough and the include column change the fingerprint."""
    base = load_settings(None, {}).fingerprint()
    changed = load_settings(write(tmp_path, f"input: {section}\n"), {}).fingerprint()
    assert changed != base


def test_passthrough_order_changes_the_fingerprint(tmp_path: Path) -> None:
    """The passthrough's order is the output's column order, so it counts."""
    one = load_settings(write(tmp_path, "input: {passthrough: [a, b]}\n"), {}).fingerprint()
    two = load_settings(write(tmp_path, "input: {passthrough: [b, a]}\n"), {}).fingerprint()
    assert one != two


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("{}", "{encoding: utf-8}"),
        ("{encoding: latin-1}", "{encoding: iso-8859-1}"),
        ("{encoding: UTF-8}", "{encoding: utf8}"),
        ("{delimiter: null}", "{}"),
        ("{passthrough: null}", "{}"),
    ],
)
def test_fingerprint_is_deterministic_for_equal_settings(
    tmp_path: Path, first: str, second: str
) -> None:
    """Settings that read the input alike, spelled alike or not, share one fingerprint."""
    a = load_settings(write(tmp_path, f"input: {first}\n"), {}).fingerprint()
    b = load_settings(write(tmp_path, f"input: {second}\n"), {}).fingerprint()
    assert a == b
    assert a == load_settings(write(tmp_path, f"input: {first}\n"), {}).fingerprint()


def test_an_encoding_left_to_be_found_is_the_fingerprint_it_always_was() -> None:
    """With no encoding given (it is found from the file's bytes, which the input's own
    fingerprint holds), the settings' fingerprint is the one DIRs begun before detection
    stored: they resume, and so does a file found to be cp1252."""
    settings = load_settings(None, {})
    assert settings.input.encoding is None
    assert settings.fingerprint() == (
        "2be1168ccabba82d362e27becc45583713d356ee967eadb2813d980f2980aff7"
    )


def test_the_command_line_reading_options_win_over_the_config(tmp_path: Path) -> None:
    """--encoding and --sheet override input.encoding and input.sheet; a named sheet is a
    setting (another sheet is another run), a sheet left to default is not in it."""
    config = write(tmp_path, "input: {encoding: latin-1, sheet: Loans}\n")
    assert load_settings(config, {}).input.codec == "iso8859-1"
    given = load_settings(config, {}, encoding="cp1252", sheet="Later")
    assert (given.input.codec, given.input.sheet) == ("cp1252", "Later")
    assert given.to_json()["input"]["sheet"] == "Later"
    named = load_settings(None, {}, sheet="Loans").fingerprint()
    assert named == load_settings(config, {}, encoding="utf-8").fingerprint()
    assert named not in (
        load_settings(None, {}).fingerprint(),
        load_settings(None, {}, sheet="Later").fingerprint(),
    )


@pytest.mark.parametrize(
    ("encoding", "said"),
    [
        ("klingon", "unknown encoding 'klingon'"),
        ("rot13", "unknown encoding 'rot13'"),
        ("utf-16", "save the file as UTF-8"),
    ],
)
def test_an_encoding_that_cannot_read_a_csv_is_a_settings_error(encoding: str, said: str) -> None:
    """An encoding Python does not know, or one that does not write ASCII as ASCII, is
    refused before any file is opened (64)."""
    with pytest.raises(SettingsError, match=said):
        load_settings(None, {}, encoding=encoding)


@pytest.mark.parametrize("encoding", ["cp1250", "iso-8859-15", "mac-roman", "UTF-8-SIG"])
def test_any_ascii_compatible_encoding_may_be_named(encoding: str) -> None:
    """Beyond UTF-8, cp1252 and latin-1: any encoding that writes ASCII as ASCII."""
    assert load_settings(None, {}, encoding=encoding).input.codec is not None


def test_include_column_can_be_mapped(tmp_path: Path) -> None:
    """input.columns may name the column of per-row extras."""
    settings = load_settings(write(tmp_path, "input: {columns: {include: Extras}}\n"), {})
    assert settings.input.columns == {"include": "Extras"}


def test_include_items_cannot_be_translated(tmp_path: Path) -> None:
    """input.values for include is refused: its items are the API's own words."""
    config = write(tmp_path, "input: {values: {include: {C: commentary}}}\n")
    with pytest.raises(SettingsError, match="values cannot translate include items"):
        load_settings(config, {})


def test_the_shipped_configs_load() -> None:
    """configs/lender_extract.yaml and configs/live.example.yaml are valid settings."""
    root = Path(__file__).resolve().parents[2]
    lender = load_settings(root / "configs" / "lender_extract.yaml", {})
    assert lender.input.delimiter == ";"
    live = load_settings(root / "configs" / "live.example.yaml", {"BATCHVAL_CLIENT_SECRET": "x"})
    assert live.api is not None


def test_fingerprint_of_0_1_is_reproduced() -> None:
    """The fingerprint batchval 0.1 stored (computed by 0.1 itself for these settings) is
    reproduced, so that a DIR it began resumes instead of being refused."""
    settings = load_settings(None, {**API_ENV, "BATCHVAL_CLIENT_SECRET": "x"}, include="commentary")
    assert settings.fingerprint_0_1() == (
        "046074a371d858646042ee51b11cea1f4fbf1f7d5acb01d67920bf8027d5f8d4"
    )
    assert settings.fingerprint() != settings.fingerprint_0_1()


def test_client_id_is_not_part_of_the_fingerprint() -> None:
    """A rotated secret (a new client id of the same account) does not change the run."""
    one = load_settings(None, API_ENV)
    other = load_settings(None, {**API_ENV, "BATCHVAL_CLIENT_ID": "lender-2"})
    assert one.fingerprint() == other.fingerprint()


def test_settings_json_leaves_the_secret_out() -> None:
    """The settings written to the manifest name the API and account, never the secret."""
    found = load_settings(None, API_ENV).to_json()
    assert found["api"] == {
        "base_url": "https://api.example/partners/v1",
        "auth_url": "https://api.example",
        "client_id": "lender",
    }
    assert "s3cret-from-env" not in repr(found)
    assert set(found) == {"api", "input", "run", "lender", "output", "index", "book"}


def test_street_settings_default_and_configured(tmp_path: Path) -> None:
    """streets' assumed price and join default to 20 and off; the run section sets them,
    and a negative price is refused."""
    default = load_settings(None, {}).run
    assert (default.street_credits, default.street_join) == (20, False)
    config = tmp_path / "c.yaml"
    config.write_text("run:\n  street_credits: 35\n  street_join: true\n")
    run = load_settings(config, {}).run
    assert (run.street_credits, run.street_join) == (35, True)
    config.write_text("run:\n  street_credits: -1\n")
    with pytest.raises(SettingsError, match="street_credits"):
        load_settings(config, {})


def test_book_settings_from_config_and_command_line(tmp_path: Path) -> None:
    """run.row_id, run.fresh_for_days and run.max_calls come from the config; the command
    line's --row-id, --fresh-for and --max-calls win; unset ones keep the defaults."""
    config = write(tmp_path, "run:\n  row_id: loan_id\n  fresh_for_days: 60\n  max_calls: 500\n")
    run = load_settings(config, {}).run
    assert (run.row_id, run.fresh_for_days, run.max_calls) == ("loan_id", 60.0, 500)
    given = {"book": "b.parquet", "row_id": "account", "fresh_for_days": None, "max_calls": 7}
    run = load_settings(config, {}, book=given).run
    assert (run.book, run.row_id, run.fresh_for_days, run.max_calls) == (
        "b.parquet",
        "account",
        60.0,
        7,
    )
    with pytest.raises(SettingsError, match="go with --book"):
        load_settings(config, {}, book={"row_id": "account"})  # no book anywhere
    booked = write(tmp_path, "run:\n  book: b.parquet\n")
    assert load_settings(booked, {}, book={"max_calls": 3}).run.max_calls == 3
    default = load_settings(None, {}).run
    assert (default.row_id, default.fresh_for_days, default.max_calls) == (None, 30.0, None)


@pytest.mark.parametrize("line", ["row_id: 3", "book: 7", "fresh_for_days: -1", "max_calls: many"])
def test_bad_book_settings_are_refused(tmp_path: Path, line: str) -> None:
    """A row id that is not a column name, or a negative or non-numeric figure: 64."""
    with pytest.raises(SettingsError):
        load_settings(write(tmp_path, f"run:\n  {line}\n"), {})


def test_the_run_s_clock_carries_the_test_seam_s_offset() -> None:
    """BATCHVAL_CLOCK_OFFSET_SECONDS moves `RunOptions.now`, the one clock a daily limit's
    not_before is taken and checked on; a bad number is refused."""
    plain = load_settings(None, {}).run.now()
    ahead = load_settings(None, {"BATCHVAL_CLOCK_OFFSET_SECONDS": "3600"}).run.now()
    assert plain.tzinfo is not None
    assert abs((ahead - plain).total_seconds() - 3600) < 5
    with pytest.raises(SettingsError, match="CLOCK_OFFSET_SECONDS"):
        load_settings(None, {"BATCHVAL_CLOCK_OFFSET_SECONDS": "soon"})


def test_max_refused_share_defaults_to_half_and_is_read(tmp_path: Path) -> None:
    """`run.max_refused_share` is half by default and read from the config, 0 included."""
    assert load_settings(None, {}).run.max_refused_share == 0.5
    for share in (0, 0.8, 1):
        path = write(tmp_path, f"run: {{max_refused_share: {share}}}\n")
        assert load_settings(path, {}).run.max_refused_share == share


@pytest.mark.parametrize("share", ["1.01", "-0.5", "half", "true"])
def test_max_refused_share_must_be_a_share(tmp_path: Path, share: str) -> None:
    """A share outside 0 to 1, or not a number, is a config error."""
    with pytest.raises(SettingsError, match="max_refused_share"):
        load_settings(write(tmp_path, f"run: {{max_refused_share: {share}}}\n"), {})


def test_max_refused_share_is_not_part_of_the_fingerprint(tmp_path: Path) -> None:
    """The share changes no request: a DIR it refused resumes with another share."""
    other = load_settings(write(tmp_path, "run: {max_refused_share: 0}\n"), {})
    assert other.fingerprint() == load_settings(None, {}).fingerprint()


def test_the_storage_section_gives_the_object_store_and_the_environment_wins(
    tmp_path: Path,
) -> None:
    """The config's storage keys become the variables AWS's tools read; a variable that is
    set wins; the secret is in neither repr nor the manifest's settings."""
    config = write(
        tmp_path,
        "storage:\n  endpoint: http://127.0.0.1:9000\n  region: eu-west-2\n"
        "  access_key_id: AKID\n  secret_access_key: storage-secret-123\n",
    )
    settings = load_settings(config, {})
    env = settings.storage.env({"AWS_REGION": "us-east-1", "AWS_SESSION_TOKEN": ""})
    assert env == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AZURE_STORAGE_ENDPOINT": "http://127.0.0.1:9000",  # one endpoint key for either store
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKID",
        "AWS_SECRET_ACCESS_KEY": "storage-secret-123",
    }
    assert settings.storage.secrets({}) == ["storage-secret-123"]
    assert "storage-secret-123" not in repr(settings)


def test_the_storage_section_gives_azure_its_variables_and_the_environment_wins(
    tmp_path: Path,
) -> None:
    """Azure's keys become the variables batchval reads an Azure store from; a variable
    that is set wins; the key and SAS token are secrets, in neither repr nor the manifest."""
    config = write(
        tmp_path,
        "storage:\n  account_name: lender\n  account_key: azure-key-123==\n"
        "  sas_token: sv=1&sig=azure%2Bsig\n",
    )
    settings = load_settings(config, {})
    env = settings.storage.env({"AZURE_STORAGE_ACCOUNT_NAME": "other"})
    assert env == {
        "AZURE_STORAGE_ACCOUNT_NAME": "other",
        "AZURE_STORAGE_ACCOUNT_KEY": "azure-key-123==",
        "AZURE_STORAGE_SAS_TOKEN": "sv=1&sig=azure%2Bsig",
    }
    assert settings.storage.secrets({}) == ["azure-key-123==", "sv=1&sig=azure%2Bsig", "azure+sig"]
    assert "azure-key-123" not in repr(settings)
    assert "azure-key-123" not in json.dumps(settings.to_json())
    assert "storage-secret-123" not in str(settings.to_json())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("storage:\n  bucket: x\n", "bucket"),
        ("storage:\n  region: 3\n", "storage.region must be a string"),
    ],
)
def test_a_wrong_storage_section_is_refused(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(write(tmp_path, text), {})


def test_a_pinned_figures_month_that_is_no_month_is_a_settings_error() -> None:
    """BATCHVAL_SANDBOX_FIGURES_MONTH is refused (64) before a run starts, not met by the
    embedded sandbox mid-run as a defect."""
    with pytest.raises(SettingsError, match=r"BATCHVAL_SANDBOX_FIGURES_MONTH: expected YYYY-MM"):
        load_settings(None, {"BATCHVAL_SANDBOX_FIGURES_MONTH": "2026-13"})
    assert load_settings(None, {"BATCHVAL_SANDBOX_FIGURES_MONTH": "2026-11"}).api is None
