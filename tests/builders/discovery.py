"""Google's published API shapes: the discovery documents google-api-python-client ships, and a
walker that says where a value leaves one of their schemas (fixtures of Google APIs are checked
with it)."""

from __future__ import annotations

import importlib.util
import json
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
        return []
    if kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
        # int64 fields are JSON strings in Google APIs; int32 ones numbers
        ok = ok or (schema.get("format") == "int64" and isinstance(value, str) and value.isdigit())
        return [] if ok else [f"{at}: an integer expected, got {value!r}"]
    if kind == "number":
        return [] if isinstance(value, int | float) else [f"{at}: a number expected"]
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{at}: a boolean expected"]
    if kind == "any":
        return []
    raise AssertionError(f"{at}: schema type {kind!r} unknown to the walker")
