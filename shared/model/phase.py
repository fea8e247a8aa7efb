"""The states of a run and of its layers, setups and canaries, as enums. Pure module.

Both are `StrEnum`s: a member equals (and hashes as) its stored string, `json.dumps` and
Firestore write it as that plain string, and `f"{member}"` prints it. Layers and setups store
their phase as the member's value. A canary stores two of them under older names ("" for
waiting, "done" for succeeded): `canary_phase_to_doc` / `canary_phase_from_doc` map them at
the document boundary, so in memory every phase is a `Phase` and documents stay as they were.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar


class Phase(StrEnum):
    """Where a layer, a stage's setup pass or a layer's canary is."""

    WAITING = "waiting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class RunStatus(StrEnum):
    """A run's status: the controller acts while it runs; `paused` holds its Jobs."""

    RUNNING = "running"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


_E = TypeVar("_E", bound=StrEnum)


class StoredStateError(ValueError):
    """A stored document holds a phase or status this code does not know."""


# The canary's stored strings where they differ from the member's value (the rest match).
_CANARY_TO_DOC = {Phase.WAITING: "", Phase.SUCCEEDED: "done"}
_CANARY_FROM_DOC = {stored: phase for phase, stored in _CANARY_TO_DOC.items()}


def phase_from_doc(value: str, where: str) -> Phase:
    """A stored layer or setup phase as a `Phase`; `where` names the document in the error."""
    return _from_doc(Phase, value, where, "phase")


def run_status_from_doc(value: str, where: str) -> RunStatus:
    """A stored run status as a `RunStatus`; `where` names the document in the error."""
    return _from_doc(RunStatus, value, where, "status")


def _from_doc(kind: type[_E], value: str, where: str, what: str) -> _E:
    try:
        return kind(value)
    except ValueError:
        raise StoredStateError(
            f"{where}: stored {what} {value!r} is not one of {', '.join(kind)}; "
            "correct the document (or run a build of cave-pipeline that knows it)"
        ) from None


def canary_phase_to_doc(phase: Phase) -> str:
    """The canary phase as its document stores it: "" (waiting), running, "done", failed."""
    phase = Phase(phase)
    return _CANARY_TO_DOC.get(phase, phase.value)


def canary_phase_from_doc(value: str, where: str) -> Phase:
    """A stored canary phase ("", running, done, failed) as a `Phase`."""
    if value in _CANARY_FROM_DOC:
        return _CANARY_FROM_DOC[value]
    if value in (Phase.RUNNING, Phase.FAILED):
        return Phase(value)
    stored = ", ".join(repr(canary_phase_to_doc(p)) for p in Phase)
    raise StoredStateError(
        f"{where}: stored canary phase {value!r} is not one of {stored}; correct the document"
    )
