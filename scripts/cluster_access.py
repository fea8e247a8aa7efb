"""Which cluster the operator CLI reads from, and what only the GKE side can tell.

The CLI only ever READS the cluster (pods, logs, events, usage: the `Cluster` port's
methods, never a client's internals); every change is an operator
action in Firestore plus a kick, and the controller acts on it. Resolution order:

1. `PIPELINE_LOCAL_CLUSTER_DIR`: a local cluster's state dir (its `jobs/` and `pods/`);
2. a local stack running in this folder (`.local-stack/stack.json`, its `cluster_dir`);
3. GKE from the environment (`GkeCluster.from_env`: `PIPELINE_GKE_ENDPOINT`, the DNS
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

from adapters.local.cluster.view import LocalClusterView
from scripts.services import DEFAULT_STACK_DIR
from shared.ports.cluster import ClusterError, ClusterReader, ClusterUnreachableError

LOCAL_DIR_ENV = "PIPELINE_LOCAL_CLUSTER_DIR"
NAMESPACE_ENV = "PIPELINE_NAMESPACE"


class ClusterAccessError(ClusterError):
    """No cluster to read from is configured (the message says what to set)."""


def local_cluster_dir(
    stack_dir: str | Path = DEFAULT_STACK_DIR, env: Mapping[str, str] | None = None
) -> Path | None:
    """The local cluster's state dir, if the CLI should read a local cluster."""
    env = os.environ if env is None else env
    explicit = env.get(LOCAL_DIR_ENV)
    if explicit:
        path = Path(explicit)
        if not (path / "jobs").is_dir():
            raise ClusterAccessError(
                f"{LOCAL_DIR_ENV}={explicit}: no local cluster there (expected its jobs/ "
                "folder); point it at the `cluster` folder of a local stack's state dir"
            )
        return path
    stack = Path(stack_dir) / "stack.json"
    if not stack.exists():
        return None
    try:
        doc = json.loads(stack.read_text())
    except (OSError, ValueError) as e:
        raise ClusterAccessError(f"{stack}: unreadable ({e}); remove it if no stack runs") from e
    return Path(doc.get("cluster_dir") or Path(stack_dir) / "cluster")


def reads_local_cluster() -> bool:
    """Whether the CLI reads a local cluster here (False if the setting for one is broken)."""
    try:
        return local_cluster_dir() is not None
    except ClusterError:
        return False


def read_cluster(
    namespace: str | None = None,
    *,
    stack_dir: str | Path = DEFAULT_STACK_DIR,
    env: Mapping[str, str] | None = None,
) -> ClusterReader:
    """The cluster to read from (see the module doc); ClusterAccessError names what to set."""
    env = dict(os.environ if env is None else env)
    local = local_cluster_dir(stack_dir, env)
    if local is not None:
        return LocalClusterView(local)
    try:
        from adapters.gke.cluster import GkeCluster
    except ImportError as e:  # the kubernetes client is in the `controller` extra
        raise ClusterAccessError(
            f"reading GKE needs the kubernetes client ({e}): "
            "pip install 'cave-pipeline[controller]'"
        ) from e
    if not env.get(NAMESPACE_ENV) and namespace:
        env[NAMESPACE_ENV] = namespace
    try:
        return GkeCluster.from_env(env)
    except ClusterError as e:
        if "no cluster configured" not in str(e):
            raise
        raise ClusterAccessError(
            f"{e}; or, for a local stack, run this in the folder of `pipeline local up` "
            f"or set {LOCAL_DIR_ENV} to its cluster folder"
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
