"""How fetched facts say "absent" and "not allowed to look": the conventions every fetcher and
check share. A resource fact is its REST JSON (a dict), None when the service answered 404,
or a `Denied` when it answered 403. Pure module."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Denied:
    """The caller may not read the resource: `what` says which call, `message` the service's."""

    what: str
    message: str = ""

    def __str__(self) -> str:
        return f"{self.what}: permission denied" + (f" ({self.message})" if self.message else "")


def members_with(policy: Mapping[str, Any] | None, role: str) -> set[str]:
    """The members an IAM policy (REST JSON: `bindings[].role/members`) grants `role`
    without a condition (a conditional grant may not hold for what the build touches)."""
    found: set[str] = set()
    for binding in (policy or {}).get("bindings", []):
        if binding.get("role") == role and not binding.get("condition"):
            found.update(binding.get("members", []))
    return found


def roles_of(policy: Mapping[str, Any] | None, member: str) -> set[str]:
    """The roles an IAM policy grants `member` without a condition."""
    return {
        b.get("role", "")
        for b in (policy or {}).get("bindings", [])
        if member in b.get("members", []) and not b.get("condition")
    }
