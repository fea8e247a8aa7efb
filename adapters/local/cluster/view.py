"""The local cluster's on-disk view, for processes other than the one running it.

The process that runs `LocalCluster` (the local stack's controller) writes one JSON file per
Job, `<state_dir>/jobs/<name>.json`, after each change (temp file + `os.replace`, so readers
never see half a file); pod logs are `<state_dir>/pods/<pod>.log`. `LocalClusterView` reads
them for the operator CLI in another terminal. File schema (version 1):

    {"version": 1, "status": {JobStatus fields, datetimes as ISO 8601},
     "pods": [{PodInfo fields}], "events": [v1 Event dicts, oldest first]}
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import asdict, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from adapters.local.kubelet.proc_usage import pods_usage
from shared.ports.cluster import ClusterError, JobStatus, PodInfo, PodUsage

log = logging.getLogger("cave_pipeline.local_cluster")

SCHEMA_VERSION = 1
_STATUS_TIMES = {"start_time", "completion_time", "created"}
_POD_TIMES = {"created", "started", "finished"}


def _dump(obj: Any, times: set[str]) -> dict[str, Any]:
    data = asdict(obj)
    for key in times:
        if data.get(key) is not None:
            data[key] = data[key].isoformat()
    return data


def _load(cls: type, data: dict[str, Any], times: set[str]) -> Any:
    known = {f.name for f in fields(cls)}
    values = {k: v for k, v in data.items() if k in known}
    for key in times:
        if values.get(key):
            values[key] = datetime.fromisoformat(values[key])
    return cls(**values)


def snapshot_text(status: JobStatus, pods: list[PodInfo], events: list[dict[str, Any]]) -> str:
    return json.dumps(
        {
            "version": SCHEMA_VERSION,
            "status": _dump(status, _STATUS_TIMES),
            "pods": [_dump(p, _POD_TIMES) for p in pods],
            "events": events,
        },
        sort_keys=True,
    )


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class SnapshotWriter:
    """The writing side: one file per Job, rewritten only when its content changed."""

    def __init__(self, jobs_dir: Path) -> None:
        self.jobs_dir = jobs_dir
        jobs_dir.mkdir(parents=True, exist_ok=True)
        for stale in jobs_dir.glob("*.json"):  # Jobs of an earlier local cluster are gone
            stale.unlink(missing_ok=True)
        self._written: dict[str, str] = {}

    def write(self, status: JobStatus, pods: list[PodInfo], events: list[dict[str, Any]]) -> None:
        text = snapshot_text(status, pods, events)
        if self._written.get(status.name) == text:
            return
        try:
            write_atomic(self.jobs_dir / f"{status.name}.json", text)
            self._written[status.name] = text
        except OSError as e:
            log.error("cannot write the view of job %s: %s", status.name, e)

    def remove(self, name: str) -> None:
        self._written.pop(name, None)
        (self.jobs_dir / f"{name}.json").unlink(missing_ok=True)


def tail_file(path: Path, lines: int) -> str:
    """The last `lines` lines of a text file, read from the end (logs can be large)."""
    if lines <= 0:
        return ""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        pos = f.tell()
        data = b""
        while pos > 0 and data.count(b"\n") <= lines:
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            data = f.read(step) + data
    text = data.decode("utf-8", errors="replace")
    parts = text.splitlines(keepends=True)
    return "".join(parts[-lines:])


def read_pod_log(pods_dir: Path, pod_name: str, tail_lines: int) -> str:
    if not pod_name or "/" in pod_name or pod_name.startswith("."):
        raise ClusterError(f"bad pod name {pod_name!r}")
    path = pods_dir / f"{pod_name}.log"
    if not path.exists():
        raise ClusterError(f"no log for pod {pod_name!r} (list pods with `pipeline pods`)")
    return tail_file(path, tail_lines)


class LocalClusterView:
    """A `ClusterReader` over a local cluster's state directory (another process runs it)."""

    def __init__(self, state_dir: Path | str) -> None:
        self.state_dir = Path(state_dir)
        self.jobs_dir = self.state_dir / "jobs"
        self.pods_dir = self.state_dir / "pods"

    def _read(self, name: str) -> dict[str, Any] | None:
        if not name or "/" in name or name.startswith("."):
            return None
        try:
            return json.loads((self.jobs_dir / f"{name}.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise ClusterError(f"cannot read local job {name!r} under {self.jobs_dir}: {e}") from e

    def get_job(self, name: str) -> JobStatus | None:
        data = self._read(name)
        return None if data is None else _load(JobStatus, data["status"], _STATUS_TIMES)

    def list_jobs(self, labels: dict[str, str]) -> list[JobStatus]:
        out: list[JobStatus] = []
        for path in sorted(self.jobs_dir.glob("*.json")):
            job = self.get_job(path.stem)
            if job is not None and all(job.labels.get(k) == v for k, v in labels.items()):
                out.append(job)
        return out

    def list_pods(self, job_name: str, index: int | None = None) -> list[PodInfo]:
        data = self._read(job_name) or {"pods": []}
        pods = [_load(PodInfo, p, _POD_TIMES) for p in data["pods"]]
        return [p for p in pods if index is None or p.index == index]

    def pod_log(self, pod_name: str, tail_lines: int = 100) -> str:
        return read_pod_log(self.pods_dir, pod_name, tail_lines)

    def job_events(self, job_name: str) -> list[dict[str, Any]]:
        data = self._read(job_name) or {"events": []}
        return list(data["events"])

    def pod_events(self, job_name: str) -> list[dict[str, Any]]:
        return []  # the local cluster records its pods' events with the Job's

    def pod_usage(self, job_name: str) -> dict[str, PodUsage]:
        running = [p.name for p in self.list_pods(job_name) if p.phase == "Running"]
        return pods_usage(self.pods_dir, running)

    def _read_only(self, what: str) -> ClusterError:
        return ClusterError(
            f"cannot {what}: this is a read-only view of the local cluster at {self.state_dir}; "
            "mutations go through the controller that runs it (e.g. `pipeline scale`, "
            "`pipeline pause`, `pipeline delete`)"
        )

    def create_job(self, manifest: dict[str, Any]) -> bool:
        raise self._read_only("create a Job")

    def apply_config_map(self, manifest: dict[str, Any]) -> None:
        raise self._read_only("write a ConfigMap")

    def patch_job(
        self, name: str, *, parallelism: int | None = None, suspend: bool | None = None
    ) -> None:
        raise self._read_only(f"patch Job {name}")

    def delete_job(self, name: str) -> None:
        raise self._read_only(f"delete Job {name}")
