"""Check bodies against the packaged OpenAPI description (``batchval/_internal/api/openapi.yaml``).

A helper imported by tests, not a test module. Schemas are validated with
``jsonschema.Draft202012Validator`` (OpenAPI 3.1 schemas are JSON Schema 2020-12);
``#/components/...`` references are resolved through a ``referencing`` registry that
holds the whole description as one resource.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import importlib.resources
import re
from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import quote

import yaml
from jsonschema import Draft202012Validator, FormatChecker, ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

__all__ = [
    "load_spec",
    "validate_component",
    "validate_request_body",
    "validate_response",
]

SPEC_URI = "urn:batchval:partner-api:openapi"
_HTTP_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})
_MAX_REPORTED_ERRORS = 10
_MAX_MESSAGE_CHARS = 300

_RFC3339_DATE_TIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$"
)
_ABSOLUTE_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$")


def _is_date_time(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    if not _RFC3339_DATE_TIME.match(instance):
        return False
    try:
        dt.datetime.fromisoformat(instance.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _is_uri(instance: object) -> bool:
    return not isinstance(instance, str) or bool(_ABSOLUTE_URI.match(instance))


def _format_checker() -> FormatChecker:
    """``Draft202012Validator.FORMAT_CHECKER``, plus ``date-time`` and ``uri`` checks.

    jsonschema only checks those two formats when optional packages (rfc3339-validator,
    rfc3987) are installed, and silently passes them otherwise; this fills the gap with
    small stdlib checks so ``format: date-time`` and ``format: uri`` are always enforced.
    """
    checker = FormatChecker(formats=())
    checker.checkers = dict(Draft202012Validator.FORMAT_CHECKER.checkers)
    if "date-time" not in checker.checkers:
        checker.checks("date-time")(_is_date_time)
    if "uri" not in checker.checkers:
        checker.checks("uri")(_is_uri)
    return checker


_FORMAT_CHECKER = _format_checker()


def load_spec() -> dict[str, Any]:
    """Load the packaged OpenAPI description (a fresh dict on every call)."""
    text = (importlib.resources.files("batchval._internal.api") / "openapi.yaml").read_text(
        encoding="utf-8"
    )
    spec = yaml.safe_load(text)
    if not isinstance(spec, dict):
        raise AssertionError("openapi.yaml does not hold a mapping at the top level")
    return cast("dict[str, Any]", spec)


@functools.cache
def _spec() -> dict[str, Any]:
    return load_spec()


@functools.cache
def _registry() -> Registry[Any]:
    resource: Resource[Any] = DRAFT202012.create_resource(copy.deepcopy(_spec()))
    registry: Registry[Any] = Registry().with_resource(SPEC_URI, resource)
    return registry


def _pointer(*segments: str, percent_encode: bool = True) -> str:
    """A JSON pointer (URI-fragment encoded unless told not to) to a place in the spec."""
    escaped = (s.replace("~", "~0").replace("/", "~1") for s in segments)
    if percent_encode:
        escaped = (quote(s, safe="~") for s in escaped)
    return "/" + "/".join(escaped)


def _ref_to_segments(ref: str) -> list[str]:
    if not ref.startswith("#/"):
        raise AssertionError(f"only local references are supported, got {ref!r}")
    return [s.replace("~1", "/").replace("~0", "~") for s in ref[2:].split("/")]


def _get(segments: list[str]) -> Any:
    node: Any = _spec()
    for segment in segments:
        if not isinstance(node, Mapping) or segment not in node:
            raise AssertionError(
                f"spec has nothing at #{_pointer(*segments, percent_encode=False)}"
            )
        node = node[segment]
    return node


def _deref(segments: list[str]) -> tuple[list[str], Mapping[str, Any]]:
    """Follow ``$ref`` chains (response, header, parameter objects) to the real object."""
    seen: set[str] = set()
    node = _get(segments)
    while isinstance(node, Mapping) and "$ref" in node:
        ref = str(node["$ref"])
        if ref in seen:
            raise AssertionError(f"reference cycle at {ref!r}")
        seen.add(ref)
        segments = _ref_to_segments(ref)
        node = _get(segments)
    if not isinstance(node, Mapping):
        raise AssertionError(
            f"spec object at #{_pointer(*segments, percent_encode=False)} is not a mapping"
        )
    return segments, node


def _format_path(path: Any) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _message(error: ValidationError) -> str:
    if error.validator == "not":
        return f"must not match {error.validator_value!r}"
    message = str(error.message)
    if len(message) > _MAX_MESSAGE_CHARS:
        message = message[: _MAX_MESSAGE_CHARS - 3] + "..."
    return message


def _validate(schema_segments: list[str], instance: object, what: str) -> None:
    schema = {"$ref": f"{SPEC_URI}#{_pointer(*schema_segments)}"}
    validator = Draft202012Validator(
        schema,
        registry=_registry(),
        format_checker=_FORMAT_CHECKER,
    )
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    if not errors:
        return
    lines = [f"{what} does not match #{_pointer(*schema_segments, percent_encode=False)}:"]
    for error in errors[:_MAX_REPORTED_ERRORS]:
        lines.append(f"  at {_format_path(error.absolute_path)}: {_message(error)}")
        # allOf/anyOf/if-then failures hide the useful detail in the context
        for sub in sorted(error.context or (), key=lambda e: list(e.absolute_path))[:5]:
            lines.append(f"    - at {_format_path(sub.absolute_path)}: {_message(sub)}")
    if len(errors) > _MAX_REPORTED_ERRORS:
        lines.append(f"  ... and {len(errors) - _MAX_REPORTED_ERRORS} more")
    raise AssertionError("\n".join(lines))


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _check_headers(
    response_segments: list[str],
    response: Mapping[str, Any],
    headers: Mapping[str, str],
    what: str,
) -> None:
    present = {k.lower(): v for k, v in headers.items()}
    documented = response.get("headers") or {}
    for name in documented:
        header_segments, header = _deref([*response_segments, "headers", name])
        value = present.get(name.lower())
        if value is None:
            if header.get("required", False):
                raise AssertionError(f"{what}: required header {name!r} is missing")
            continue
        instance: object = value
        schema = header.get("schema") or {}
        if schema.get("type") == "integer":
            try:
                instance = int(value)
            except ValueError:
                raise AssertionError(
                    f"{what}: header {name!r} should be an integer, got {value!r}"
                ) from None
        _validate([*header_segments, "schema"], instance, f"{what} header {name!r}")


def validate_response(
    method: str,
    path_template: str,
    status: int,
    content_type: str,
    body: object,
    *,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Assert that a response matches the description.

    ``method`` and ``path_template`` name the operation (e.g. ``"POST"``,
    ``"/valuations"``; ``"/valuations/{id}"``); ``status`` must be documented for it;
    ``content_type`` (parameters such as charset are ignored) must be the documented
    media type; ``body`` (parsed JSON) must match its schema. When ``headers`` are
    given, documented response headers are checked too (required ones must be present;
    values must match their schema).
    """
    paths = _spec().get("paths") or {}
    if path_template not in paths:
        raise AssertionError(
            f"path {path_template!r} is not documented; documented: {sorted(paths)}"
        )
    method_key = method.lower()
    if method_key not in _HTTP_METHODS or method_key not in paths[path_template]:
        raise AssertionError(f"operation {method.upper()} {path_template} is not documented")
    what = f"{method.upper()} {path_template} -> {status}"
    responses = paths[path_template][method_key].get("responses") or {}
    status_key = str(status)
    if status_key not in responses:
        raise AssertionError(
            f"{what}: status {status} is not documented; documented: "
            + ", ".join(sorted(responses))
        )
    response_segments, response = _deref(
        ["paths", path_template, method_key, "responses", status_key]
    )

    content = response.get("content") or {}
    media_type = _media_type(content_type)
    if not content:
        if body not in (None, b"", ""):
            raise AssertionError(f"{what}: no body documented, got {body!r}")
    elif media_type not in content:
        raise AssertionError(
            f"{what}: content type {content_type!r} is not documented; "
            f"expected one of {sorted(content)}"
        )
    elif "schema" in content[media_type]:
        _validate([*response_segments, "content", media_type, "schema"], body, f"{what} body")

    if headers is not None:
        _check_headers(response_segments, response, headers, what)


def validate_request_body(body: object) -> None:
    """Assert that ``body`` is a valid ValuationRequest (the body of POST /valuations)."""
    validate_component("ValuationRequest", body)


def validate_component(name: str, instance: object) -> None:
    """Assert that ``instance`` matches ``#/components/schemas/<name>``."""
    schemas = (_spec().get("components") or {}).get("schemas") or {}
    if name not in schemas:
        raise AssertionError(f"no schema {name!r} in components/schemas")
    _validate(["components", "schemas", name], instance, name)
