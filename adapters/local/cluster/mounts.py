"""Secrets and ConfigMaps of the local cluster, and the pod mounts that read them.

Kubernetes mounts a Secret's or ConfigMap's keys as files under a volume mount's path. The
local cluster's pods are subprocesses without a filesystem of their own, so each object is
materialised once as a directory of files (`<state>/secrets/<name>/`, `<state>/configmaps/
<name>/`) and a pod's env values under a mount path (`GOOGLE_APPLICATION_CREDENTIALS=
/home/worker/.cloudvolume/secrets/google-secret.json`) are remapped into that directory. A
mount with a `subPath` (the dataset file: `PCG_DATASET=/app/datasets/dataset.yml`) puts that
one key (or sub-folder) at the mount path, as the kubelet does, so a value at the mount path
maps to `<object dir>/<subPath>`. An object that does not exist leaves the env as it is
(optional volumes; the program names the missing file).
"""

from __future__ import annotations

import base64
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.ports.cluster import ManifestRejectedError

KINDS = {"secret": "secrets", "configMap": "configmaps"}


@dataclass(frozen=True)
class Mount:
    """A container's volume mount of a Secret or ConfigMap."""

    path: str  # the mountPath
    kind: str  # "secret" or "configMap"
    name: str  # the object's name
    sub_path: str = ""  # the key (or sub-folder) mounted at `path`; "": the whole object


def parse_mounts(pod_spec: dict[str, Any], container: dict[str, Any]) -> tuple[Mount, ...]:
    """The Secret and ConfigMap mounts of a container (other volume kinds are ignored)."""
    sources: dict[str, tuple[str, str]] = {}
    for volume in pod_spec.get("volumes") or []:
        if "secret" in volume:
            sources[volume.get("name", "")] = ("secret", volume["secret"].get("secretName", ""))
        elif "configMap" in volume:
            sources[volume.get("name", "")] = ("configMap", volume["configMap"].get("name", ""))
    out = []
    for mount in container.get("volumeMounts") or []:
        name, path = mount.get("name"), mount.get("mountPath")
        if not name or not path:
            raise ManifestRejectedError("Job manifest rejected: volumeMounts need name, mountPath")
        sub_path = str(mount.get("subPath") or "").strip("/")
        if ".." in sub_path.split("/"):
            raise ManifestRejectedError(
                f"Job manifest rejected: volumeMounts {name}: subPath must not contain '..'"
            )
        if name in sources:
            kind, obj = sources[name]
            out.append(Mount(str(path).rstrip("/"), kind, obj, sub_path))
    return tuple(out)


def write_object(root: Path, manifest: dict[str, Any]) -> Path:
    """Materialise a v1 Secret (`data` base64, `stringData`) or ConfigMap (`data`) as a
    directory of files; returns it. Replaces what was there."""
    kind = manifest.get("kind")
    if kind not in ("Secret", "ConfigMap"):
        raise ManifestRejectedError(f"expected a Secret or ConfigMap, got kind {kind!r}")
    name = (manifest.get("metadata") or {}).get("name")
    if not name:
        raise ManifestRejectedError(f"{kind} manifest rejected: metadata.name is required")
    folder = root / KINDS["secret" if kind == "Secret" else "configMap"] / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for key, value in (manifest.get("data") or {}).items():
        raw = base64.b64decode(value) if kind == "Secret" else str(value).encode()
        (folder / key).write_bytes(raw)
    for key, value in (manifest.get("stringData") or {}).items():
        (folder / key).write_bytes(str(value).encode())
    return folder


def remap_env(env: dict[str, str], mounts: tuple[Mount, ...], root: Path) -> dict[str, str]:
    """`env` with every value under a mounted path pointing into the object's directory, as
    an absolute path (a pod runs in its own folder, not the operator's)."""
    out = dict(env)
    for mount in mounts:
        folder = (root / KINDS[mount.kind] / mount.name).absolute()
        if not folder.is_dir():
            continue
        target = folder / mount.sub_path if mount.sub_path else folder
        for key, value in env.items():
            if value == mount.path or value.startswith(mount.path + "/"):
                out[key] = str(target) + value[len(mount.path) :]
    return out
