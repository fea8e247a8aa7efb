"""The contract tests of local Kubernetes (the real control plane, the process kubelet) share one
`KubeCluster` per package: one log sink for them all (stopping a sink waits out its watch, some
seconds a test otherwise), `published` growing across tests. Job names are unique per test
(`tests.builders.kube_cluster.unique`), so `job_log_entries(name)` is one test's; every Job a
test created is deleted when it ends, as the root `kube_cluster` fixture does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.builders.kube_cluster import KubeCluster


@pytest.fixture(scope="package")
def shared_kube_cluster(local_kubernetes: Any) -> Iterator[KubeCluster]:
    from tests.builders.kube_cluster import open_kube_cluster

    cluster = open_kube_cluster(local_kubernetes)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def kube_cluster(shared_kube_cluster: KubeCluster) -> Iterator[KubeCluster]:
    """The package's `KubeCluster`; the Jobs the test created are deleted after it."""
    yield shared_kube_cluster
    while shared_kube_cluster.created:
        name = shared_kube_cluster.created.pop()
        if name:
            shared_kube_cluster.cluster.delete_job(name)
