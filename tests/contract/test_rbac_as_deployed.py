"""RBAC as deployed, on local Kubernetes: the controller acts as its own service account under
terraform's Role (terraform/k8s/pipeline-kubernetes.yaml), so a verb missing from the Role
fails here with the API server's own Forbidden, as it would on GKE."""

from __future__ import annotations

import copy
import re
import uuid
from typing import Any

import pytest

from adapters.gke.cluster import GkeCluster
from adapters.local.controlplane.identities import apply, render
from shared.ports.cluster import ClusterError
from tests.builders.local_jobs import manifest, wait_for

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

    def forbidden(parallelism: int) -> str:
        """The API server's refusal of a patch ("" if it was granted)."""
        try:
            cluster.patch_job(name, parallelism=parallelism)
        except ClusterError as e:
            return str(e)
        return ""

    try:
        cluster.patch_job(name, parallelism=2)  # granted as deployed
        try:
            apply(kube.admin, [without_patch])
            # The API server's RBAC authorizer learns of a Role change from its informer:
            # asynchronously, so each answer is awaited, not assumed at once.
            refusal = wait_for(lambda: forbidden(3), what="the patch refused", timeout=30)
            assert re.search('forbidden.*cannot patch resource "jobs"', refusal), refusal
        finally:
            apply(kube.admin, [role])
        wait_for(lambda: not forbidden(4), what="the patch granted again", timeout=30)
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
