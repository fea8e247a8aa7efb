"""Google's published API shapes: the discovery documents google-api-python-client ships, a
walker that says where a value leaves one of their schemas, and the lookups that find the
response schema of a method by its id or by the URL it is called at (every Google-API fixture
is checked with them: tests/unit/test_fixture_shapes.py)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest


def discovery_document(name: str, override: str | None = None) -> dict[str, Any]:
    """The discovery document `name` (e.g. "cloudbilling.v1.json") that google-api-python-client
    ships (the dev extra), or the file `override` names."""
    if override:
        return json.loads(Path(override).read_text())
    spec = importlib.util.find_spec("googleapiclient")
    if spec is None or spec.origin is None:
        pytest.fail(
            "google-api-python-client is missing: it ships the discovery documents fixtures "
            "are checked against; install the dev extra (bash scripts/setup.sh)"
        )
    path = Path(spec.origin).parent / "discovery_cache" / "documents" / name
    return json.loads(path.read_text())


def schema_problems(
    value: Any, schema: dict[str, Any], schemas: dict[str, Any], at: str
) -> list[str]:
    """Where `value` leaves `schema`: a key that is no property of its type, a value of the
    wrong JSON type, a string outside its enum."""
    if "$ref" in schema:
        return schema_problems(value, schemas[schema["$ref"]], schemas, at)
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{at}: an object expected, got {value!r}"]
        problems: list[str] = []
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if props is not None and key in props:
                problems += schema_problems(item, props[key], schemas, f"{at}.{key}")
            elif extra is not None:
                problems += schema_problems(item, extra, schemas, f"{at}.{key}")
            else:
                problems.append(f"{at}: {key!r} is not a property of this object")
        return problems
    if kind == "array":
        if not isinstance(value, list):
            return [f"{at}: an array expected"]
        return [
            p
            for i, v in enumerate(value)
            for p in schema_problems(v, schema["items"], schemas, f"{at}[{i}]")
        ]
    if kind == "string":
        if not isinstance(value, str):
            return [f"{at}: a string expected, got {value!r}"]
        if "enum" in schema and value not in schema["enum"]:
            return [f"{at}: {value!r} is none of {schema['enum']}"]
        form = FORMATS.get(schema.get("format", ""))
        if form is not None and not form.fullmatch(value):
            return [f"{at}: {value!r} is no {schema['format']}"]
        return []
    if kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
        # 64-bit integers are JSON strings in Google APIs; 32-bit ones numbers
        wide = schema.get("format") in ("int64", "uint64")
        ok = ok or (
            wide and isinstance(value, str) and FORMATS["int64"].fullmatch(value) is not None
        )
        return [] if ok else [f"{at}: an integer expected, got {value!r}"]
    if kind == "number":
        return [] if isinstance(value, int | float) else [f"{at}: a number expected"]
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{at}: a boolean expected"]
    if kind == "any":
        return []
    raise AssertionError(f"{at}: schema type {kind!r} unknown to the walker")


# The string formats the walker checks (the discovery documents' `format` of a string field):
# RFC 3339 times (up to nanoseconds), durations ("3.5s"), 64-bit integers sent as strings.
FORMATS = {
    "google-datetime": re.compile(
        r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})"
    ),
    "date-time": re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})"),
    "google-duration": re.compile(r"-?\d+(\.\d{1,9})?s"),
    "int64": re.compile(r"-?\d+"),
    "uint64": re.compile(r"\d+"),
}

# Google's JSON error envelope (AIP-193: {"error": {code, message, status, details}}), which no
# discovery document describes; `status` is a google.rpc.Code name.
RPC_CODES = [
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED",
]  # fmt: skip
ERROR_ENVELOPE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "integer", "format": "int32"},
                "message": {"type": "string"},
                "status": {"type": "string", "enum": RPC_CODES},
                "details": {
                    "type": "array",
                    "items": {"type": "object", "additionalProperties": {"type": "any"}},
                },
                # the legacy JSON APIs (storage, compute) add the v1 error list
                "errors": {
                    "type": "array",
                    "items": {"type": "object", "additionalProperties": {"type": "any"}},
                },
            },
        }
    },
}


def methods(resource: dict[str, Any]) -> list[dict[str, Any]]:
    """Every method of a discovery document (or of one of its resources), nested ones too."""
    out = list((resource.get("methods") or {}).values())
    for child in (resource.get("resources") or {}).values():
        out += methods(child)
    return out


def method(doc: dict[str, Any], method_id: str) -> dict[str, Any]:
    """The method `method_id` (e.g. "monitoring.projects.timeSeries.list") of `doc`."""
    found = [m for m in methods(doc) if m.get("id") == method_id]
    if not found:
        raise AssertionError(f"{doc['name']}.{doc['version']} has no method {method_id}")
    return found[0]


def _path_pattern(path: str) -> str:
    # {+name} spans slashes (a resource name); {name} is one segment
    parts = re.split(r"(\{\+?[^}]+\})", path)
    return "".join(
        (".+" if p.startswith("{+") else "[^/]+") if p.startswith("{") else re.escape(p)
        for p in parts
    )


def method_at(doc: dict[str, Any], http_method: str, url: str) -> dict[str, Any]:
    """The method of `doc` a call `http_method url` is (the most literal of the paths that
    match, so `topics/t:getIamPolicy` is not read as the topic `t:getIamPolicy`)."""
    base = doc["rootUrl"] + doc["servicePath"]
    path = url.split("?")[0]
    matching = []
    for m in methods(doc):
        if m.get("httpMethod") != http_method:
            continue
        # flatPath is the precise one ("v1/projects/{projectsId}/topics/{topicsId}"); path's
        # "v1/{+topic}" would match any URL
        template = m.get("flatPath") or m["path"]
        if re.fullmatch(re.escape(base) + _path_pattern(template), path):
            matching.append((len(re.sub(r"\{[^}]+\}", "", template)), m))
    if not matching:
        raise AssertionError(f"no method of {doc['name']}.{doc['version']} is {http_method} {url}")
    return max(matching, key=lambda lm: lm[0])[1]


def document_for(url: str) -> str | None:
    """The discovery document's file name for a Google API URL
    ("https://pubsub.googleapis.com/v1/..." -> "pubsub.v1.json"); None: not a Google JSON API."""
    found = re.match(r"https://([a-z0-9]+)\.googleapis\.com/(?:([a-z]+)/)?(v\d+)/", url)
    return f"{found[1]}.{found[3]}.json" if found else None


def response_problems(
    body: Any, response: dict[str, Any] | None, doc: dict[str, Any], at: str
) -> list[str]:
    """Where a method's answer `body` leaves its `response` schema (a method without one
    answers `{}`)."""
    if response is None:
        return [] if body == {} else [f"{at}: the method answers no body, got {body!r}"]
    return schema_problems(body, response, doc["schemas"], at)
