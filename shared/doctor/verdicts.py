"""A check's verdict, its result, and the exit-code rule of `pipeline doctor`. Pure module."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"  # the build would stop on it: the fix says what to do
    WARN = "warn"  # the build may run, but something will probably bite
    SKIP = "skip"  # does not apply here (the local stack, a config without the stage, ...)
    UNREACHABLE = "unreachable"  # the service did not answer: nothing was decided


# Exit codes (the CLI's: 2 bad input is raised before any check runs).
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_UNREACHABLE = 3


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome: `detail` says what was found, `fix` what to do (empty on pass)."""

    check: str
    title: str
    verdict: Verdict
    detail: str
    fix: str = ""

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["verdict"] = self.verdict.value
        return doc


def exit_code(results: Iterable[CheckResult]) -> int:
    """0 only when every check that applies passes (skips are neutral); 3 when a service could
    not be reached (the other verdicts are then incomplete, so this wins); else 1."""
    verdicts = {r.verdict for r in results}
    if Verdict.UNREACHABLE in verdicts:
        return EXIT_UNREACHABLE
    if verdicts & {Verdict.FAIL, Verdict.WARN}:
        return EXIT_FAILED
    return EXIT_OK


class PreflightFailedError(Exception):
    """A check `pipeline start` runs first failed: the start is refused (the checks printed
    say what to fix)."""


def blocks_start(results: Iterable[CheckResult]) -> bool:
    """Whether `pipeline start`'s preflight refuses: a failed check (warnings are printed and
    let the build start; an unreachable service is the CLI's exit 3 before that)."""
    return any(r.verdict is Verdict.FAIL for r in results)
