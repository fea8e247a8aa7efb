"""Which cluster the operator CLI reads from, and what only the GKE side can tell.

The CLI only ever READS the cluster (pods, logs, events, usage: the `Cluster` port's
methods, never a client's internals); every change is an operator
action in Firestore plus a kick, and the controller acts on it. Resolution order:

1. a local stack running in this folder (`.local-stack/stack.json`): its Kubernetes, through
   the GKE adapter with the operators' kubeconfig (their service account, terraform's Role);
2. GKE from the environment (`GkeCluster.from_env`: `PIPELINE_GKE_ENDPOINT`, the DNS
   endpoint - an IP endpoint with `PIPELINE_GKE_CA` - or `KUBECONFIG` /
   `PIPELINE_KUBE_CONTEXT`); the namespace is
   `PIPELINE_NAMESPACE`, else the run's configured namespace.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import click

from adapters import wiring
from scripts.services import DEFAULT_STACK_DIR
from shared.ports.cluster import ClusterError, ClusterReader, ClusterUnreachableError
from shared.ports.secret_writer import SecretWriter

NAMESPACE_ENV = "PIPELINE_NAMESPACE"


class ClusterAccessError(ClusterError):
    """No cluster to read from is configured (the message says what to set)."""


def local_stack(stack_dir: str | Path = DEFAULT_STACK_DIR) -> dict | None:
    """The local stack running in `stack_dir` (its stack.json), if any."""
    stack = Path(stack_dir) / "stack.json"
    if not stack.exists():
        return None
    try:
        doc = json.loads(stack.read_text())
    except (OSError, ValueError) as e:
        raise ClusterAccessError(f"{stack}: unreadable ({e}); remove it if no stack runs") from e
    if "kubeconfig" not in doc:
        raise ClusterAccessError(
            f"{stack} was written by an older local stack; stop it and run `pipeline local up`"
        )
    return doc


def reads_local_cluster() -> bool:
    """Whether the CLI reads a local stack's cluster here (False if its file is broken)."""
    try:
        return local_stack() is not None
    except ClusterError:
        return False


def _open(factory, *args: object, **kwargs: object):  # noqa: ANN001, ANN202 - a cluster seam
    """`factory(...)` of the CLI's wiring; ClusterAccessError naming the extra when the
    kubernetes client is not installed."""
    try:
        return factory(*args, **kwargs)
    except ImportError as e:  # the kubernetes client is in the `controller` extra
        raise ClusterAccessError(
            f"reading a cluster needs the kubernetes client ({e}): "
            "pip install 'cave-pipeline[controller]'"
        ) from e


def stack_cluster(doc: dict, services: wiring.CliServices | None = None) -> ClusterReader:
    """A local stack's Kubernetes as the operators' service account reads it."""
    services = services or wiring.cli_services()
    return _open(services.cluster_reader, doc["namespace"], doc["kubeconfig"])


class StackClusterReader:
    """The cluster of a local stack that may not be up yet (the demo's live view starts before
    it): a `ClusterReader` that reads `stack.json` on first use, and ClusterError until then."""

    def __init__(self, stack_dir: Path) -> None:
        self.stack_dir = stack_dir
        self._reader: ClusterReader | None = None

    def __getattr__(self, name: str):  # noqa: ANN204 - a ClusterReader method
        if self._reader is None:
            doc = local_stack(self.stack_dir)
            if doc is None:
                raise ClusterError(f"the local stack in {self.stack_dir} is not up yet")
            self._reader = stack_cluster(doc)
        return getattr(self._reader, name)


def read_cluster(
    namespace: str | None = None,
    *,
    stack_dir: str | Path = DEFAULT_STACK_DIR,
    env: Mapping[str, str] | None = None,
    services: wiring.CliServices | None = None,
) -> ClusterReader:
    """The cluster to read from (see the module doc); ClusterAccessError names what to set.
    `services`: the CLI's wiring (default `wiring.cli_services()`)."""
    services = services or wiring.cli_services()
    return _resolve(services.cluster_reader, namespace, stack_dir, env)


def secret_writer(
    namespace: str | None = None,
    *,
    stack_dir: str | Path = DEFAULT_STACK_DIR,
    env: Mapping[str, str] | None = None,
    services: wiring.CliServices | None = None,
) -> SecretWriter:
    """`pipeline setup`'s Secret writer, on the cluster `read_cluster` would read."""
    services = services or wiring.cli_services()
    return _resolve(services.secret_writer, namespace, stack_dir, env)


def _resolve(factory, namespace, stack_dir, env):  # noqa: ANN001, ANN202 - see read_cluster
    env = dict(os.environ if env is None else env)
    doc = local_stack(stack_dir)
    if doc is not None:
        return _open(factory, doc["namespace"], doc["kubeconfig"])
    if not env.get(NAMESPACE_ENV) and namespace:
        env[NAMESPACE_ENV] = namespace
    try:
        return _open(factory, env=env)
    except ClusterError as e:
        if "no cluster configured" not in str(e):
            raise
        raise ClusterAccessError(
            f"{e}; or, for a local stack, run this in the folder of `pipeline local up`"
        ) from e


@contextmanager
def cluster_errors() -> Iterator[None]:
    """Cluster failures as the CLI's exits: 2 when none is configured, 3 when unreachable,
    1 otherwise."""
    try:
        yield
    except ClusterAccessError as e:
        raise ValueError(str(e)) from e
    except ClusterUnreachableError as e:
        raise ConnectionError(str(e)) from e
    except ClusterError as e:
        raise click.ClickException(str(e)) from e
