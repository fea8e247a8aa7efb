"""RBAC as deployed, on local Kubernetes: the controller acts as its own service account under
terraform's Role (terraform/k8s/pipeline-kubernetes.yaml), so a verb missing from the Role
fails here with the API server's own Forbidden, as it would on GKE."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest

from adapters.gke.cluster import GkeCluster
from adapters.local.controlplane.identities import apply, render
from shared.ports.cluster import ClusterError
from tests.builders.local_jobs import manifest

ROLE = "cave-pipeline-controller"


def controller_role(namespace: str) -> dict[str, Any]:
    return next(
        d for d in render(namespace) if d["kind"] == "Role" and d["metadata"]["name"] == ROLE
    )


def test_a_verb_removed_from_the_controllers_role_is_forbidden(local_kubernetes: Any) -> None:
    kube = local_kubernetes
    cluster = GkeCluster.from_kubeconfig(
        namespace=kube.namespace, config_file=str(kube.controller_kubeconfig)
    )
    name = f"rbac-{uuid.uuid4().hex[:6]}"
    assert cluster.create_job(manifest(name, suspend=True))
    role = controller_role(kube.namespace)
    without_patch = copy.deepcopy(role)
    for rule in without_patch["rules"]:
        if "jobs" in rule["resources"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != "patch"]
    try:
        cluster.patch_job(name, parallelism=2)  # granted as deployed
        try:
            apply(kube.admin, [without_patch])
            with pytest.raises(ClusterError, match='forbidden.*cannot patch resource "jobs"'):
                cluster.patch_job(name, parallelism=3)
        finally:
            apply(kube.admin, [role])
        cluster.patch_job(name, parallelism=4)  # granted again
        assert cluster.get_job(name).parallelism == 4
    finally:
        cluster.delete_job(name)


def test_the_operators_may_not_touch_jobs(local_kubernetes: Any) -> None:
    """The CLI reads; every change is an operator action the controller carries out."""
    kube = local_kubernetes
    operator = GkeCluster.from_kubeconfig(
        namespace=kube.namespace, config_file=str(kube.operator_kubeconfig)
    )
    with pytest.raises(ClusterError, match="forbidden"):
        operator.create_job(manifest(f"rbac-op-{uuid.uuid4().hex[:6]}"))
