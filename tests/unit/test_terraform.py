"""Properties of terraform/ that must hold whatever else changes (parsed with python-hcl2).

Least privilege (no primitive roles, no project-wide Kubernetes or Bigtable roles, the nodes'
own account), dead letters on every trigger, internal-only functions, retries on. `terraform
validate` needs the providers, which CI may not download; these need only the files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared import dead_letters
from shared.adapters.google.pubsub_bus import TOPICS

hcl2 = pytest.importorskip("hcl2", reason="python-hcl2 is in the dev extra")

TERRAFORM = Path(__file__).resolve().parents[2] / "terraform"

PRIMITIVE_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}
BROAD_CONTAINER_ROLES = {"roles/container.developer", "roles/container.admin"}


def _clean(value: Any) -> Any:
    """python-hcl2's output without its quoting and bookkeeping: `"x"` -> `x`."""
    if isinstance(value, dict):
        return {
            _clean(k): _clean(v)
            for k, v in value.items()
            if k not in ("__is_block__", "__comments__", "__inline_comments__")
        }
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def _parse(directory: Path = TERRAFORM) -> dict[str, list[Any]]:
    merged: dict[str, list[Any]] = {}
    for path in sorted(directory.glob("*.tf")):
        with path.open() as f:
            for key, blocks in _clean(hcl2.load(f)).items():
                merged.setdefault(key, []).extend(blocks)
    return merged


TF = _parse()


def resources(kind: str, tf: dict[str, list[Any]] = TF) -> dict[str, dict[str, Any]]:
    """`{name: body}` of every resource of one type."""
    found: dict[str, dict[str, Any]] = {}
    for block in tf.get("resource", []):
        for name, body in block.get(kind, {}).items():
            found[name] = body
    return found


def all_resources(tf: dict[str, list[Any]] = TF) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for block in tf.get("resource", []):
        for kind, named in block.items():
            for name, body in named.items():
                yield kind, name, body


def local(name: str, tf: dict[str, list[Any]] = TF) -> Any:
    for block in tf.get("locals", []):
        if name in block:
            return block[name]
    raise KeyError(name)


def variable_default(name: str, tf: dict[str, list[Any]] = TF) -> Any:
    for block in tf.get("variable", []):
        if name in block:
            return block[name]["default"]
    raise KeyError(name)


def one(block: Any) -> dict[str, Any]:
    """A nested block (python-hcl2 gives a list of one)."""
    if isinstance(block, list):
        assert len(block) == 1, block
        return block[0]
    return block


def roles_of(body: dict[str, Any]) -> list[str]:
    """The role(s) an IAM resource grants: `role = "..."` or a for_each over literal roles."""
    role = body.get("role", "")
    if "${" not in role:
        return [role]
    literal = re.findall(r"roles/[A-Za-z0-9_.]+", str(body.get("for_each", "")))
    assert literal, f"cannot tell which roles {body} grants"
    return literal


# --- least privilege -------------------------------------------------------------------------


def iam_grants(tf=TF) -> Iterator[tuple[str, str, str]]:
    """`(resource type, name, role)` of every IAM member/binding."""
    for kind, name, body in all_resources(tf):
        if "_iam_" in kind:
            for role in roles_of(body):
                yield kind, name, role


def test_no_primitive_roles():
    grants = list(iam_grants())
    assert grants, "no IAM grants parsed: the test would prove nothing"
    assert [g for g in grants if g[2] in PRIMITIVE_ROLES] == []


def test_no_project_wide_container_developer_or_admin():
    project_roles = [r for k, _, r in iam_grants() if k == "google_project_iam_member"]
    assert "roles/container.clusterViewer" in project_roles
    assert BROAD_CONTAINER_ROLES.isdisjoint(project_roles)


def test_kubernetes_access_is_a_namespaced_role_with_only_the_needed_verbs():
    docs = list(yaml.safe_load_all((TERRAFORM / "k8s" / "pipeline-rbac.yaml").read_text()))
    assert [d["kind"] for d in docs] == ["Role", "RoleBinding"]  # no ClusterRole(Binding)
    role, binding = docs
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "${namespace}"
    rules = {
        (group, resource): sorted(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert rules == {
        ("batch", "jobs"): sorted(["create", "get", "list", "patch", "delete"]),
        ("", "pods"): ["get", "list"],
        ("", "pods/log"): ["get", "list"],
        ("", "events"): ["get", "list"],
        ("", "configmaps"): ["create", "update"],  # the run's dataset file
        ("", "secrets"): ["create", "update"],  # `pipeline setup`'s credential files
    }
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    outputs = {k: v for block in TF["output"] for k, v in block.items()}
    rendered = outputs["pipeline_rbac_manifest"]["value"]
    assert "k8s/pipeline-rbac.yaml" in rendered and "google_service_account.controller" in rendered


def test_bigtable_grants_are_on_the_instance_not_the_project():
    bigtable = sorted((k, n) for k, n, r in iam_grants() if r.startswith("roles/bigtable."))
    assert bigtable == [
        ("google_bigtable_instance_iam_member", "controller_bigtable"),
        ("google_bigtable_instance_iam_member", "worker_bigtable"),
    ]
    grant = resources("google_bigtable_instance_iam_member")["worker_bigtable"]
    assert grant["instance"] == "${var.bigtable_instance}"
    assert grant["member"] == "${google_service_account.worker.member}"
    # The controller's completeness check only reads the done markers (docs/verify.md).
    check = resources("google_bigtable_instance_iam_member")["controller_bigtable"]
    assert check["instance"] == "${var.bigtable_instance}"
    assert check["member"] == "${google_service_account.controller.member}"
    assert check["role"] == "roles/bigtable.reader"


def test_nodes_have_their_own_account_with_default_node_role():
    nodes = resources("google_project_iam_member")["nodes"]
    assert nodes["role"] == "roles/container.defaultNodeServiceAccount"
    assert nodes["member"] == "${google_service_account.nodes.member}"
    cluster = resources("google_container_cluster")["pipeline"]
    defaults = one(one(cluster["cluster_autoscaling"])["auto_provisioning_defaults"])
    assert defaults["service_account"] == "${google_service_account.nodes.email}"
    pull = resources("google_artifact_registry_repository_iam_member")["nodes_pull"]
    assert pull["member"] == "${google_service_account.nodes.member}"
    assert pull["role"] == "roles/artifactregistry.reader"


def test_controller_and_function_build_hold_only_what_they_use():
    controller = resources("google_project_iam_member")["controller"]
    assert sorted(roles_of(controller)) == [
        "roles/container.clusterViewer",
        "roles/datastore.user",
    ]
    build_roles = [
        r for k, n, r in iam_grants() if n.startswith("function_build") and "project" in k
    ]
    assert "roles/cloudbuild.builds.builder" not in build_roles
    assert sorted(build_roles) == ["roles/logging.logWriter", "roles/storage.objectViewer"]
    reads = resources("google_project_iam_member")["function_build_reads_source"]
    assert "gcf-v2-sources-" in one(reads["condition"])["expression"]


def test_the_pubsub_service_agent_exists_before_it_is_granted_anything():
    identity = resources("google_project_service_identity")["pubsub"]
    assert identity["service"] == "pubsub.googleapis.com"
    assert local("pubsub_service_agent") == "${google_project_service_identity.pubsub.member}"
    to_agent = [
        (k, n)
        for k, n, b in all_resources()
        if "_iam_" in k and "pubsub_service_agent" in b["member"]
    ]
    assert len(to_agent) == 3  # token creator, dead-letter publisher, trigger subscriber


# --- dead letters, retries, ingress ---------------------------------------------------------


def test_every_trigger_subscription_dead_letters():
    triggers = local("trigger_functions")
    # every topic the controller consumes is a trigger (alerts is for people)
    assert {fn["topic"] for fn in triggers.values()} == set(TOPICS) - {"alerts"}
    # ... and the alert code knows each trigger's function and subscription name
    assert {fn["topic"]: name for name, fn in triggers.items()} == dead_letters.TRIGGER_FUNCTIONS
    subscription = resources("google_pubsub_subscription")["trigger"]
    assert subscription["for_each"] == "${local.trigger_functions}"
    assert dead_letters.source_topic(subscription["name"].replace("${each.value.topic}", "kick"))
    policy = one(subscription["dead_letter_policy"])
    assert policy["dead_letter_topic"] == '${google_pubsub_topic.topics["dead-letters"].id}'
    assert policy["max_delivery_attempts"] == "${var.dead_letter_max_attempts}"
    assert 5 <= variable_default("dead_letter_max_attempts") <= 20
    assert dead_letters.DEAD_LETTER_TOPIC in local("topics")


def test_every_push_subscription_but_the_dead_letters_own_dead_letters():
    pushing = {
        n: b for n, b in resources("google_pubsub_subscription").items() if "push_config" in b
    }
    assert set(pushing) == {"trigger", "dead_letter_trigger"}
    for name, body in pushing.items():
        reads_dead_letters = "dead-letters" in body["topic"]
        assert ("dead_letter_policy" in body) != reads_dead_letters, name


def test_functions_are_fed_only_by_our_subscriptions_and_internal_only():
    functions = resources("google_cloudfunctions2_function")["fn"]
    assert functions["for_each"] == "${local.functions}"
    # an Eventarc trigger would own a subscription that cannot dead-letter
    assert "event_trigger" not in functions
    assert one(functions["service_config"])["ingress_settings"] == "ALLOW_INTERNAL_ONLY"
    invokers = resources("google_cloud_run_v2_service_iam_member")
    assert [b["member"] for b in invokers.values()] == ["${google_service_account.invoker.member}"]


def test_the_agent_may_dead_letter():
    publisher = resources("google_pubsub_topic_iam_member")["pubsub_agent_publishes_dead_letters"]
    assert publisher["role"] == "roles/pubsub.publisher"
    assert "dead-letters" in publisher["topic"]
    subscriber = resources("google_pubsub_subscription_iam_member")["pubsub_agent_acks_triggers"]
    assert subscriber["for_each"] == "${google_pubsub_subscription.trigger}"
    assert subscriber["role"] == "roles/pubsub.subscriber"


def test_retries_are_on():
    for name, body in resources("google_pubsub_subscription").items():
        if "push_config" not in body:
            continue
        retry = one(body["retry_policy"])
        assert retry["minimum_backoff"] == "10s" and retry["maximum_backoff"] == "600s", name
        # a push must be answered within the ack deadline: at least the function's timeout
        assert body["ack_deadline_seconds"] == "${local.push_ack_deadline_s}"
    assert local("push_ack_deadline_s") == "${local.function_timeout_s + 60}"
    functions = resources("google_cloudfunctions2_function")["fn"]
    timeout = one(functions["service_config"])["timeout_seconds"]
    assert timeout == "${local.function_timeout_s}"


def test_cluster_network_defaults_are_secure():
    cluster = resources("google_container_cluster")["pipeline"]
    assert one(cluster["private_cluster_config"])["enable_private_nodes"] == "${var.private_nodes}"
    assert variable_default("private_nodes") is True
    assert variable_default("authorized_networks") == []
    assert one(cluster["binary_authorization"])["evaluation_mode"] != "DISABLED"
