"""The chaos mailbox: files through which the demo's injector hands faults to workers.

A directory (``PCG_CHAOS_DIR`` in the workers' environment) holds:

- ``armed/<fault_id>.json``: a fault due now, for the next worker that begins a chunk. A
  worker takes it by renaming it into ``taken/`` (atomic: of racing workers one wins).
- ``held/<fault_id>.json``: a worker holding a chunk mid-write for a pod-level fault (its pod
  name, pid, chunk and attempt token); the injector looks at the rows written so far, then
  SIGKILLs, preempts or loses that pod, and writes ``held/<fault_id>.released`` for a pod
  whose process lives on (a lost node's zombie).
- ``audit/<pod>.jsonl``: one line per chunk attempt event (begun, returned, marked done)
  with the attempt's token and the token of the unfinished attempt it knew of. These stand
  in for Cloud Logging, which keeps a pod's logs after the pod is gone: a lost node's pod
  takes its `kubectl logs` with it, but not these.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

CHAOS_DIR_ENV = "PCG_CHAOS_DIR"
ARMED, TAKEN, HELD, AUDIT = "armed", "taken", "held", "audit"


def mailbox(root: Path) -> Path:
    """Create the mailbox's directories under `root`; returns `root`."""
    for sub in (ARMED, TAKEN, HELD, AUDIT):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return root


def arm(root: Path, fault_id: str, kind: str, **details: Any) -> None:
    """Post a fault for the next worker (written aside, then renamed: never half-read)."""
    tmp = root / ARMED / f".{fault_id}.tmp"
    tmp.write_text(json.dumps({"fault_id": fault_id, "kind": kind, **details}))
    tmp.rename(root / ARMED / f"{fault_id}.json")


def take(root: Path, pod: str, kinds: Collection[str] | None = None) -> dict[str, Any] | None:
    """The oldest armed fault (of `kinds`, if given), now this pod's; None if there is none."""
    for path in sorted((root / ARMED).glob("*.json")):
        if kinds is not None and path.stem.split("-", 1)[-1] not in kinds:
            continue  # fault ids are "<seq>-<kind>"
        dest = root / TAKEN / f"{path.stem}.json"
        try:
            path.rename(dest)
        except FileNotFoundError:
            continue  # another worker took it first
        fault = json.loads(dest.read_text())
        fault["pod"] = pod
        dest.write_text(json.dumps(fault))
        return fault
    return None


def taken(root: Path) -> list[dict[str, Any]]:
    """Every fault a worker took."""
    return [json.loads(p.read_text()) for p in sorted((root / TAKEN).glob("*.json"))]


def still_armed(root: Path) -> list[str]:
    """Fault ids armed but never taken."""
    return [p.stem for p in sorted((root / ARMED).glob("*.json"))]


def hold(root: Path, fault: dict[str, Any], timeout_s: float, **attempt: Any) -> bool:
    """Announce this worker holds its chunk for `fault` (`attempt`: its stage, layer, chunk
    id and token), then wait until the injector releases it (True) or `timeout_s` passes
    (False). A SIGKILL ends the wait for good."""
    fid = fault["fault_id"]
    doc = {**fault, **attempt, "pid": os.getpid(), "at": time.time()}
    tmp = root / HELD / f".{fid}.tmp"
    tmp.write_text(json.dumps(doc))
    tmp.rename(root / HELD / f"{fid}.json")
    released = root / HELD / f"{fid}.released"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if released.exists():
            return True
        time.sleep(0.05)
    return False


def held(root: Path) -> list[dict[str, Any]]:
    """Workers holding a chunk for a pod-level fault, not yet handled."""
    out = []
    for path in sorted((root / HELD).glob("*.json")):
        if not (root / HELD / f"{path.stem}.handled").exists():
            out.append(json.loads(path.read_text()))
    return out


def mark_handled(root: Path, fault_id: str, release: bool) -> None:
    """The injector acted on a held fault; `release` lets the worker's chunk go on."""
    (root / HELD / f"{fault_id}.handled").touch()
    if release:
        (root / HELD / f"{fault_id}.released").touch()


def audit(root: Path, pod: str, record: dict[str, Any]) -> None:
    """Append one chunk-attempt record (one write of one line: atomic with O_APPEND)."""
    line = json.dumps({**record, "pod": pod, "t": time.time()}) + "\n"
    fd = os.open(root / AUDIT / f"{pod}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def audit_records(root: Path) -> list[dict[str, Any]]:
    """Every audit record, in time order."""
    records = []
    for path in sorted((root / AUDIT).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                pass  # a line cut by a SIGKILL mid-write
    return sorted(records, key=lambda r: r.get("t", 0.0))
