"""In-place resize of a running layer's pods (docs/cli.md#steering-a-build): when the config
now gives the layer other requests than its Job was created with (`pipeline apply`, or
`job.rightsize: auto`), each of its Running pods still at other requests is asked once to take
the new ones through the pod `resize` subresource (Kubernetes 1.33+). A cluster that cannot
(422, or no subresource: `ResizeOutcome.UNSUPPORTED`) leaves the pod as it is, and the layer's
next attempt gets the new requests from its new Job, as before. Pods the Job creates later come
from its old template and are asked in turn.

Each pod is asked once per target (`JobAttempt.resize_asked`, kept to the pods still Running,
so it stays as small as the layer's parallelism): a refused resize is never retried every
reconcile. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.jobs.manifest import CONTAINER
from shared.model.state import LayerState
from shared.ports.cluster import PodInfo
from shared.reconcile.decision import Action, LayerPlan, ResizePod

_EPS = 1e-6  # requests are snapped to millicores and MiB: anything closer is the same


def _same(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return abs(a[0] - b[0]) < _EPS and abs(a[1] - b[1]) < _EPS


def container_resources(manifest: dict[str, Any] | None) -> dict[str, dict[str, str]] | None:
    """The worker container's `resources` block of a rendered Job (None: none renders)."""
    if manifest is None:
        return None
    containers = manifest["spec"]["template"]["spec"].get("containers") or []
    found = next((c for c in containers if c.get("name") == CONTAINER), None)
    return None if found is None else found.get("resources")


def resize_step(ls: LayerState, lp: LayerPlan, pods: Sequence[PodInfo], out: list[Action]) -> None:
    """Ask the layer's Running pods whose requests are not the plan's to take them in place
    (once each per target); nothing when the plan's requests are those the Job was created
    with, or the Job's creation requests are not known (a layer stored before they were)."""
    created = (ls.pods.cpu_request, ls.pods.memory_request_gib)
    target = (lp.cpu, lp.memory_gib)
    resources = container_resources(lp.manifest)
    if created == (0.0, 0.0) or resources is None or _same(created, target):
        ls.job.resize_cpu, ls.job.resize_memory_gib, ls.job.resize_asked = 0.0, 0.0, []
        return
    if not _same(target, (ls.job.resize_cpu, ls.job.resize_memory_gib)):
        ls.job.resize_cpu, ls.job.resize_memory_gib, ls.job.resize_asked = *target, []
    running = [p for p in pods if p.phase == "Running"]
    alive = {p.name for p in running}
    asked = [name for name in ls.job.resize_asked if name in alive]
    for pod in running:
        if pod.name in asked or _same((pod.cpu_request, pod.memory_request_gib), target):
            continue
        out.append(ResizePod(ls.job.name, pod.name, CONTAINER, resources))
        asked.append(pod.name)
    ls.job.resize_asked = asked
