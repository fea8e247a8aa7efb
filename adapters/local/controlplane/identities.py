"""RBAC as deployed: the stack applies the Kubernetes manifest terraform renders
(`terraform/k8s/pipeline-kubernetes.yaml`: the namespace, the pods' service accounts, the
controller's and the operators' Roles and bindings, the node-metrics ClusterRole), with
ServiceAccounts standing for the Google identities GKE would see, and writes one kubeconfig
per identity from a service-account token. The controller and the CLI then act as themselves:
a verb missing from a Role fails locally with the API server's own Forbidden, as on GKE.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from adapters.local.kube_api import KubeApi

REPO = Path(__file__).resolve().parents[3]
MANIFEST = REPO / "terraform" / "k8s" / "pipeline-kubernetes.yaml"
CONTROLLER_SA, OPERATOR_SA = "pipeline-controller", "pipeline-operator"
WORKER_KSA, SETUP_KSA = "pipeline-worker", "pipeline-setup"
TOKEN_SECONDS = 48 * 3600  # a stack lives hours at most
_PLACEHOLDER = re.compile(r"(?<!\$)\$\{(\w+)\}")

_PATHS = {
    ("v1", "Namespace"): "/api/v1/namespaces",
    ("v1", "ServiceAccount"): "/api/v1/namespaces/{ns}/serviceaccounts",
    ("v1", "Service"): "/api/v1/namespaces/{ns}/services",
    ("apiregistration.k8s.io/v1", "APIService"): "/apis/apiregistration.k8s.io/v1/apiservices",
    (
        "rbac.authorization.k8s.io/v1",
        "Role",
    ): "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    (
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
    ): "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
    ): "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
    ): "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
}


@dataclass(frozen=True)
class Identities:
    """The kubeconfig of each identity the stack's clients use."""

    controller: Path
    operator: Path
    namespace: str


def render(namespace: str, text: str | None = None) -> list[dict[str, Any]]:
    """terraform's template filled as `outputs.tf` fills it, with ServiceAccount subjects."""

    def subjects(name: str) -> str:
        return json.dumps([{"kind": "ServiceAccount", "name": name, "namespace": namespace}])

    values = {
        "namespace": namespace,
        "worker_ksa": WORKER_KSA,
        "setup_ksa": SETUP_KSA,
        "worker_gsa": f"{WORKER_KSA}@local.iam.gserviceaccount.com",
        "setup_gsa": f"{SETUP_KSA}@local.iam.gserviceaccount.com",
        "controller_subjects": subjects(CONTROLLER_SA),
        "operator_subjects": subjects(OPERATOR_SA),
    }
    source = MANIFEST.read_text() if text is None else text

    def fill(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            raise KeyError(f"{MANIFEST}: placeholder ${{{m.group(1)}}} has no local value")
        return values[m.group(1)]

    filled = _PLACEHOLDER.sub(fill, source).replace("$${", "${")
    return [doc for doc in yaml.safe_load_all(filled) if doc]


def apply(api: KubeApi, docs: list[dict[str, Any]]) -> None:
    """Create each object, or replace it if it exists (as `kubectl apply` would end)."""
    for doc in docs:
        key = (doc["apiVersion"], doc["kind"])
        meta = doc["metadata"]
        base = _PATHS[key].format(ns=meta.get("namespace", ""))
        created = api.request("POST", base, doc, ok=(409,))
        if created is None:
            current = api.request("GET", f"{base}/{meta['name']}")
            doc = {
                **doc,
                "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]},
            }
            api.request("PUT", f"{base}/{meta['name']}", doc)


def service_account_token(api: KubeApi, namespace: str, name: str) -> str:
    answer = api.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": TOKEN_SECONDS},
        },
    )
    return answer["status"]["token"]


def set_up(api: KubeApi, control_plane: Any, namespace: str) -> Identities:
    """Apply terraform's manifest for `namespace`, add the two identities' ServiceAccounts,
    and write their kubeconfigs (`controller.kubeconfig`, `operator.kubeconfig`)."""
    docs = render(namespace)
    apply(api, docs[:1])  # the namespace first
    accounts = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": n, "namespace": namespace},
        }
        for n in (CONTROLLER_SA, OPERATOR_SA)
    ]
    apply(api, accounts + docs[1:])
    paths = {}
    for role, sa in (("controller", CONTROLLER_SA), ("operator", OPERATOR_SA)):
        token = service_account_token(api, namespace, sa)
        paths[role] = control_plane.write_kubeconfig(role, token, namespace)
    return Identities(paths["controller"], paths["operator"], namespace)
