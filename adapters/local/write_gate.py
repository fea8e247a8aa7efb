"""The in-process functions' cluster on the local stack: the controller's GKE adapter, with a
hook before each write (the chaos injector's `host_killed` fails the first write of a
committed decision there, as a function host killed between its commit and its act).

Reads pass straight through; the writes are the `JobWriter` port's. Nothing is replaced at
run time: the stack hands this to the functions' wiring, and a fault is a hook set on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shared.ports.cluster import Cluster, ResizeOutcome


class WriteGate:
    """`inner` for the functions, with `fault_hook(write)` called before each write (a write
    the hook raises from does not happen)."""

    def __init__(self, inner: Cluster) -> None:
        self._inner = inner
        self.fault_hook: Callable[[str], None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # the reads (ClusterReader), and the adapter's own

    def _before(self, write: str) -> None:
        hook = self.fault_hook
        if hook is not None:
            hook(write)

    def create_job(self, manifest: dict[str, Any]) -> bool:
        self._before("create_job")
        return self._inner.create_job(manifest)

    def apply_config_map(self, manifest: dict[str, Any]) -> None:
        self._before("apply_config_map")
        self._inner.apply_config_map(manifest)

    def patch_job(
        self, name: str, *, parallelism: int | None = None, suspend: bool | None = None
    ) -> None:
        self._before("patch_job")
        self._inner.patch_job(name, parallelism=parallelism, suspend=suspend)

    def delete_job(self, name: str, scope: Mapping[str, str] | None = None) -> None:
        self._before("delete_job")
        self._inner.delete_job(name, scope)

    def drain_job(self, name: str, scope: Mapping[str, str] | None = None) -> None:
        self._before("drain_job")
        self._inner.drain_job(name, scope)

    def delete_pod(self, name: str) -> None:
        self._before("delete_pod")
        self._inner.delete_pod(name)

    def resize_pod(
        self, name: str, container: str, resources: dict[str, dict[str, str]]
    ) -> ResizeOutcome:
        self._before("resize_pod")
        return self._inner.resize_pod(name, container, resources)
