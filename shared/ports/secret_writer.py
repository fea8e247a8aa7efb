"""The Secret-writing port: `pipeline setup` creates or replaces the pods' credential Secret.

Apart from `ClusterReader` (the CLI's other view of the cluster only reads) and from
`JobWriter` (the controller's); implemented by `adapters.gke.cluster.GkeCluster`. Pure
module: a Protocol, no I/O.
"""

from __future__ import annotations

from typing import Any, Protocol


class SecretWriter(Protocol):
    """Writes one Secret of the namespace it was built for."""

    def apply_secret(self, manifest: dict[str, Any]) -> None:
        """Create the Secret of `manifest`, or replace the one of its name."""
        ...
