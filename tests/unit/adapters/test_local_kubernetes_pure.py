"""The pure parts of local Kubernetes: the control plane's Go module derivation, the process
kubelet's pod status, Nodes, container env and volumes, its log endpoint, and the log sink's
delay setting. Table-driven; no process is started."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.local.controlplane import build
from adapters.local.kubelet import pod_status
from adapters.local.kubelet.container import Container, expand, field_value, quantity, remap
from adapters.local.kubelet.log_server import render
from adapters.local.kubelet.node import NodeSpec, node_object, node_status
from adapters.local.log_sink import parse_sink_delay

T0 = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)

# The shape of k8s.io/kubernetes's own go.mod (an excerpt, written here).
KUBE_GO_MOD = """module k8s.io/kubernetes
require (
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)
replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tgithub.com/other/mod => github.com/fork/mod v1.0.0
)
"""


def test_the_staging_modules_come_from_kubernetes_own_go_mod() -> None:
    assert build.staging_modules(KUBE_GO_MOD) == ["k8s.io/api", "k8s.io/client-go"]
    block = build.replace_block(build.staging_modules(KUBE_GO_MOD), "v1.34.4")
    assert block == (
        "replace (\n\tk8s.io/api => k8s.io/api v0.34.4\n"
        "\tk8s.io/client-go => k8s.io/client-go v0.34.4\n)\n"
    )


@pytest.mark.parametrize(("version", "twin"), [("v1.34.4", "v0.34.4"), ("v1.37.2", "v0.37.2")])
def test_each_release_has_its_published_twins(version: str, twin: str) -> None:
    assert build.twin_version(version) == twin


@pytest.mark.parametrize("version", ["v2.0.0", "v1.34", "v1.34.0-rc.1"])
def test_a_version_that_is_not_a_release_is_refused(version: str) -> None:
    with pytest.raises(build.BuildError, match="v1.X.Y"):
        build.twin_version(version)


def test_the_committed_go_mod_replaces_every_staging_module_by_its_twin() -> None:
    text = (build.MODULE_DIR / "go.mod").read_text()
    version = build.kubernetes_version(text)
    assert version.startswith("v1.") and int(version.split(".")[1]) >= 34  # GKE's regular
    twin = build.twin_version(version)
    replaced = [ln for ln in text.splitlines() if " => k8s.io/" in ln]
    assert len(replaced) >= 31 and all(ln.endswith(f" {twin}") for ln in replaced)


def test_the_cache_key_follows_the_module_and_the_go_version() -> None:
    assert build.cache_key("go1.26.8") == build.cache_key("go1.26.8")
    assert build.cache_key("go1.26.8") != build.cache_key("go1.27.0")


@pytest.mark.parametrize(
    ("code", "oom", "phase", "reason"),
    [
        (0, False, "Succeeded", "Completed"),
        (1, False, "Failed", "Error"),
        (42, False, "Failed", "Error"),
        (137, True, "Failed", "OOMKilled"),
        (143, False, "Failed", "Error"),
    ],
)
def test_a_terminated_container_writes_the_phase_and_exit_code(
    code: int, oom: bool, phase: str, reason: str
) -> None:
    patch = pod_status.terminated("worker", "img", 7, code, started=T0, finished=T0, oom_killed=oom)
    status = patch["status"]
    state = status["containerStatuses"][0]["state"]["terminated"]
    assert (status["phase"], state["exitCode"], state["reason"]) == (phase, code, reason)
    ready = {c["type"]: c["status"] for c in status["conditions"]}
    assert ready["Ready"] == ready["ContainersReady"] == "False"
    assert "DisruptionTarget" not in ready  # never written over: strategic merge keeps it


def test_a_running_container_is_ready_and_a_kubelet_eviction_carries_its_condition() -> None:
    status = pod_status.running("worker", "img", 7, T0)["status"]
    assert status["phase"] == "Running" and status["containerStatuses"][0]["ready"] is True
    assert {c["type"] for c in status["conditions"]} >= {"Ready", "ContainersReady"}
    evicted = pod_status.evicted("The node was low on resource: memory. ", T0)["status"]
    (cond,) = evicted["conditions"]
    assert (evicted["reason"], cond["type"], cond["reason"]) == (
        "Evicted",
        "DisruptionTarget",
        "TerminationByKubelet",
    )
    delete = pod_status.pod_uid_precondition("u1")
    assert delete["gracePeriodSeconds"] == 0 and delete["preconditions"] == {"uid": "u1"}


def test_spot_nodes_are_labelled_and_tainted_as_gke_does() -> None:
    spot = node_object(NodeSpec("n1", spot=True), 1)
    assert spot["metadata"]["labels"]["cloud.google.com/gke-spot"] == "true"
    assert spot["spec"]["taints"] == [
        {"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NoSchedule"}
    ]
    plain = node_object(NodeSpec("n2", spot=False), 1)
    assert "cloud.google.com/gke-spot" not in plain["metadata"]["labels"]
    status = node_status(NodeSpec("n1", cpu=2, memory_gib=8), 4321, T0)["status"]
    assert status["capacity"]["cpu"] == "2000m" and status["capacity"]["memory"] == "8192Mi"
    assert status["daemonEndpoints"]["kubeletEndpoint"]["Port"] == 4321


POD = {
    "metadata": {
        "name": "job-3-abcde",
        "namespace": "ns",
        "uid": "u",
        "annotations": {"batch.kubernetes.io/job-completion-index": "3"},
    },
    "spec": {
        "nodeName": "n1",
        "containers": [
            {
                "name": "worker",
                "command": ["python", "-m", "worker"],
                "args": ["$(PCG_LAYER)", "$$(kept)"],
                "env": [
                    {"name": "PCG_LAYER", "value": "2"},
                    {"name": "LABEL", "value": "L$(PCG_LAYER)"},
                    {
                        "name": "JOB_COMPLETION_INDEX",
                        "valueFrom": {
                            "fieldRef": {
                                "fieldPath": "metadata.annotations"
                                "['batch.kubernetes.io/job-completion-index']"
                            }
                        },
                    },
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {
                        "name": "CPUS",
                        "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu"}},
                    },
                ],
                "resources": {"requests": {"cpu": "1500m", "memory": "512Mi"}},
            }
        ],
    },
}


def test_the_downward_api_and_var_expansion_as_the_kubelet_resolves_them(tmp_path: Path) -> None:
    c = Container(POD, tmp_path)
    env = c.env(lambda kind, name, key: None)
    assert env == {
        "PCG_LAYER": "2",
        "LABEL": "L2",
        "JOB_COMPLETION_INDEX": "3",
        "POD": "job-3-abcde",
        "CPUS": "2",  # rounded up to the divisor, as the kubelet does
    }
    assert c.argv(env)[1:] == ["-m", "worker", "2", "$(kept)"]
    assert field_value(POD, "spec.nodeName") == "n1" and field_value(POD, "status.phase") is None


@pytest.mark.parametrize(
    ("text", "value"),
    [("250m", 0.25), ("2", 2.0), ("512Mi", 512 * 2**20), ("1Gi", 2**30), ("1G", 1e9)],
)
def test_quantities(text: str, value: float) -> None:
    assert quantity(text) == pytest.approx(value)


def test_env_under_a_mount_path_points_into_the_volume(tmp_path: Path) -> None:
    mounts = {"/home/worker/secrets": tmp_path / "sec", "/app/d.yml": tmp_path / "cm" / "d.yml"}
    env = remap(
        {"CREDS": "/home/worker/secrets/k.json", "D": "/app/d.yml", "O": "/app/other.yml"}, mounts
    )
    assert env == {
        "CREDS": str(tmp_path / "sec" / "k.json"),
        "D": str(tmp_path / "cm" / "d.yml"),
        "O": "/app/other.yml",  # the image's own file
    }
    assert expand("$(A)-$(B)", {"A": "x"}) == "x-$(B)"  # an unknown variable stays as written


LINES = [("2026-12-02T03:00:00.000000001Z", "one"), ("2026-12-02T03:00:01.5Z", "two")]


@pytest.mark.parametrize(
    ("tail", "timestamps", "body"),
    [
        (None, False, b"one\ntwo\n"),
        (1, False, b"two\n"),
        (1, True, b"2026-12-02T03:00:01.5Z two\n"),
        (0, False, b""),
    ],
)
def test_logs_are_served_as_the_kubelet_serves_them(
    tail: int | None, timestamps: bool, body: bytes
) -> None:
    assert render(LINES, tail=tail, timestamps=timestamps) == body


@pytest.mark.parametrize(
    ("text", "delay"),
    [("5-60", (5.0, 60.0)), ("0", (0.0, 0.0)), ("2.5", (2.5, 2.5)), ("1-3", (1.0, 3.0))],
)
def test_sink_delay_settings(text: str, delay: tuple[float, float]) -> None:
    assert parse_sink_delay(text) == delay


@pytest.mark.parametrize("text", ["soon", "60-5", "-1", "5-x"])
def test_bad_sink_delay_settings_say_how_to_write_them(text: str) -> None:
    with pytest.raises(ValueError, match="sink delay"):
        parse_sink_delay(text)


def test_the_demo_shortens_the_sink_delay_unless_told_otherwise(monkeypatch) -> None:
    from adapters.local.stack import SINK_DELAY_ENV, demo_sink_delay, sink_delay_from_env

    monkeypatch.delenv(SINK_DELAY_ENV, raising=False)
    assert demo_sink_delay() == (0.0, 1.0) and sink_delay_from_env() == (5.0, 60.0)
    monkeypatch.setenv(SINK_DELAY_ENV, "2-3")
    assert demo_sink_delay() == sink_delay_from_env() == (2.0, 3.0)
