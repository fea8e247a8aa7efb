"""GkeCluster's Secrets and ConfigMaps (the pods' mounts): created, or replaced when they
exist (409), as requests the real client sends (tests/builders/gke_api answers)."""

from __future__ import annotations

import pytest

from shared.ports.cluster import ClusterError

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "b"}}
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dg=="}}
CONFLICT = {"kind": "Status", "code": 409, "reason": "AlreadyExists", "message": "exists"}


def test_a_config_map_is_created(gke, server) -> None:
    server.answer(201, CM)
    gke.apply_config_map(CM)
    [req] = server.requests
    assert (req["method"], req["url"].split("/api/v1")[1]) == (
        "POST",
        "/namespaces/pipeline/configmaps",
    )


def test_an_existing_secret_is_replaced(gke, server) -> None:
    server.answer(409, CONFLICT)
    server.answer(200, SECRET)
    gke.apply_secret(SECRET)
    assert [(r["method"], r["url"].split("/api/v1")[1]) for r in server.requests] == [
        ("POST", "/namespaces/pipeline/secrets"),
        ("PUT", "/namespaces/pipeline/secrets/s"),
    ]


def test_a_forbidden_secret_says_so(gke, server) -> None:
    server.answer(403, {"kind": "Status", "code": 403, "reason": "Forbidden", "message": "no"})
    with pytest.raises(ClusterError):
        gke.apply_secret(SECRET)
