"""OpenLineage for a BatchvalOperator task (docs/how-to/airflow.md, "Lineage"): what a
batchval command reads and writes, as datasets named by OpenLineage's naming spec, and
what the run did, as a run facet of batchval's own.

`lineage_of` works it out from the task's arguments (before the run: the input, the book
and the files the command writes) and, once a round has run, from the run's status (its
input as given, each Parquet file's rows, bytes and columns from summary.json's `files`,
the book's place): plain data, tested without Airflow. `operator_lineage` turns it into
the OpenLineage provider's `OperatorLineage`, importing the provider only when it is
installed and asks (`BatchvalOperator.get_openlineage_facets_on_*`).

Names (OpenLineage's dataset naming): `s3://bucket/key` is namespace `s3://bucket`, name
`key`; `az://container/key` (Blob Storage) is `wasbs://container@account.dfs.core.windows.net`,
`key`, and an `abfs(s)://` place is `abfss://container@account.dfs.core.windows.net`, `key`,
the account from the place itself or from the round's environment (its storage
connection); a local path is namespace `file`, name the absolute path.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

# The round's environment's names for the Azure account (batchval's store/azure.py reads them).
_ACCOUNT_VARIABLES = ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT")
_CONNECTION_STRING = "AZURE_STORAGE_CONNECTION_STRING"
_ENDPOINT = "AZURE_STORAGE_ENDPOINT"

# The files each command writes into its place (the report reads a run's and writes one).
_WRITES: Mapping[str, tuple[str, ...]] = {
    "run": ("results.parquet", "problems.parquet"),
    "streets": ("street_analysis.parquet", "problems.parquet"),
    "report": ("report.html",),
}
_READS_FROM_PLACE: Mapping[str, tuple[str, ...]] = {
    "report": ("results.parquet", "problems.parquet"),
}


@dataclasses.dataclass(frozen=True, slots=True)
class Dataset:
    """A dataset as OpenLineage names it, with what is known of it (after the run)."""

    namespace: str
    name: str
    rows: int | None = None
    size: int | None = None
    # Each column's name, Arrow type and description, as summary.json's `files` gives them.
    columns: tuple[Mapping[str, str], ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Lineage:
    inputs: tuple[Dataset, ...]
    outputs: tuple[Dataset, ...]
    # batchval's run facet: what the run is and what it did (figures and names, no secret).
    run: Mapping[str, Any]


def named(place: str, environ: Mapping[str, str]) -> tuple[str, str]:
    """A place (a path, or an s3://, az://, abfs:// or abfss:// URL) as OpenLineage's
    (namespace, name)."""
    if place.startswith("file://"):
        place = urlsplit(place).path
    scheme = place.partition("://")[0] if "://" in place else ""
    if not scheme:
        return "file", os.path.abspath(place)
    url = urlsplit(place)
    key = url.path.lstrip("/")
    if scheme == "s3":
        return f"s3://{url.netloc}", key
    if scheme in ("az", "abfs", "abfss"):
        container, _, host = url.netloc.partition("@")
        account = host.partition(".")[0] if host else azure_account(environ)
        shown = "wasbs" if scheme == "az" else "abfss"
        if not account:  # the spec's name needs the account: the container alone, said so
            return f"{shown}://{container}", key
        return f"{shown}://{container}@{account}.dfs.core.windows.net", key
    return f"{scheme}://{url.netloc}", key


def azure_account(environ: Mapping[str, str]) -> str:
    """The Azure account a round's environment names: its account name, else the
    connection string's `AccountName`, else an emulator endpoint's path or an account URL's
    first label."""
    for variable in _ACCOUNT_VARIABLES:
        if environ.get(variable):
            return environ[variable]
    for part in environ.get(_CONNECTION_STRING, "").split(";"):
        key, _, value = part.partition("=")
        if key.strip().lower() == "accountname" and value.strip():
            return value.strip()
    endpoint = environ.get(_ENDPOINT, "")
    if endpoint:
        url = urlsplit(endpoint)
        path = url.path.strip("/")
        return path.partition("/")[0] if path else (url.hostname or "").partition(".")[0]
    return ""


def option_value(arguments: Sequence[str], option: str) -> str | None:
    """The value of `--option VALUE` or `--option=VALUE` among the arguments."""
    for n, argument in enumerate(arguments):
        if argument == option and n + 1 < len(arguments):
            return arguments[n + 1]
        if argument.startswith(option + "="):
            return argument.partition("=")[2]
    return None


def lineage_of(
    arguments: Sequence[str],
    out_dir: str,
    environ: Mapping[str, str],
    *,
    status: Mapping[str, Any] | None = None,
    exit_code: int | None = None,
    rounds: int | None = None,
) -> Lineage:
    """What the command reads and writes, named; with the run's `status` (read after a
    round), each written Parquet file's rows, bytes and columns and the run's figures."""
    command = arguments[0] if arguments else ""
    status = status or {}
    place = out_dir.rstrip("/")
    given = arguments[1] if len(arguments) > 1 and not arguments[1].startswith("-") else None
    book_section = status.get("book") if isinstance(status.get("book"), Mapping) else None
    book = option_value(arguments, "--book") if command == "run" else None
    if book_section is not None and isinstance(book_section.get("path"), str):
        book = book_section["path"]

    def dataset(where: str, **known: Any) -> Dataset:
        return Dataset(*named(where, environ), **known)

    inputs = [] if given is None or command not in ("run", "streets") else [given]
    inputs += [f"{place}/{name}" for name in _READS_FROM_PLACE.get(command, ())]
    if book is not None:
        inputs.append(book)
    files = {  # a run's or streets' own: a report's status is of the run it reads
        file["name"]: file
        for file in (status.get("files") or () if command in ("run", "streets") else ())
        if isinstance(file, Mapping) and isinstance(file.get("name"), str)
    }
    written = list(_WRITES.get(command, ()))
    written += [name for name in files if name not in written]
    outputs = []
    for name in written:
        file = files.get(name) or {}
        outputs.append(
            dataset(
                f"{place}/{name}",
                rows=file.get("rows"),
                size=file.get("bytes"),
                columns=tuple(c for c in file.get("columns") or () if isinstance(c, Mapping)),
            )
        )
    if book is not None:
        outputs.append(dataset(book))
    return Lineage(
        inputs=tuple(dataset(where) for where in inputs),
        outputs=tuple(outputs),
        run=run_facet(command, out_dir, status, exit_code, rounds),
    )


def run_facet(
    command: str,
    out_dir: str,
    status: Mapping[str, Any],
    exit_code: int | None,
    rounds: int | None,
) -> dict[str, Any]:
    """batchval's own run facet: the run's id, its invocations and the task's rounds, the
    credits it was charged (this invocation and in all), its exit code and mode."""
    credits = status.get("credits_charged") or {}
    rows = status.get("rows") or {}
    return {
        "command": command,
        "place": out_dir,
        "runId": status.get("run_id"),
        "mode": status.get("mode"),
        "invocations": status.get("invocations"),
        "taskRounds": rounds,
        "creditsThisInvocation": credits.get("this_invocation"),
        "creditsTotal": credits.get("total"),
        "rowsValued": rows.get("valued"),
        "rowsWithProblems": rows.get("problems"),
        "exitCode": exit_code if exit_code is not None else status.get("exit_code"),
    }


def operator_lineage(lineage: Lineage) -> Any:
    """The OpenLineage provider's `OperatorLineage` for `lineage`: each output with a schema
    facet (its columns) and output statistics (rows, bytes) once known, and the run facet
    `batchval`. Imports the provider: called only by the provider itself."""
    from airflow.providers.common.compat.openlineage.facet import (
        Dataset as OpenLineageDataset,
    )
    from airflow.providers.common.compat.openlineage.facet import (
        OutputDataset,
        OutputStatisticsOutputDatasetFacet,
        SchemaDatasetFacet,
        SchemaDatasetFacetFields,
    )
    from airflow.providers.openlineage.extractors import OperatorLineage

    def schema(dataset: Dataset) -> dict[str, Any]:
        if not dataset.columns:
            return {}
        fields = [
            SchemaDatasetFacetFields(
                name=column["name"],
                type=column.get("type"),
                description=column.get("description") or None,
            )
            for column in dataset.columns
        ]
        return {"schema": SchemaDatasetFacet(fields=fields)}

    def statistics(dataset: Dataset) -> dict[str, Any]:
        if dataset.rows is None:
            return {}
        facet = OutputStatisticsOutputDatasetFacet(rowCount=dataset.rows, size=dataset.size)
        return {"outputStatistics": facet}

    return OperatorLineage(
        inputs=[OpenLineageDataset(namespace=d.namespace, name=d.name) for d in lineage.inputs],
        outputs=[
            OutputDataset(
                namespace=d.namespace,
                name=d.name,
                facets=schema(d),
                outputFacets=statistics(d),
            )
            for d in lineage.outputs
        ],
        run_facets={"batchval": _batchval_facet(lineage.run)},
    )


def _batchval_facet(fields: Mapping[str, Any]) -> Any:
    """batchval's run facet, a RunFacet with the run's figures as its properties (as the
    provider's own composite facets are built)."""
    from airflow.providers.common.compat.openlineage.facet import RunFacet

    return RunFacet().with_additional_properties(**fields)
