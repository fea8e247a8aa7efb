"""Properties of terraform/ that must hold whatever else changes (parsed with python-hcl2).

Least privilege (no primitive roles, no project-wide Kubernetes or Bigtable roles, the nodes'
own account), dead letters on every trigger, internal-only functions, retries on. `terraform
validate` needs the providers, which CI may not download; these need only the files.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from typing import Any

import kubernetes_validate
import yaml
from packaging.requirements import Requirement

from adapters.google.pubsub_bus import TOPICS
from adapters.local.stack import TRIGGER_RETRY_BACKOFF_S
from shared.config.config import WorkloadIdentity
from shared.control import dead_letters
from tests.builders.terraform_hcl import (
    TERRAFORM,
    TF,
    all_resources,
    local,
    one,
    resources,
    variable_default,
)

PRIMITIVE_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}
BROAD_CONTAINER_ROLES = {"roles/container.developer", "roles/container.admin"}


def roles_of(body: dict[str, Any]) -> list[str]:
    """The role(s) an IAM resource grants: `role = "..."`, or a for_each over literal roles
    (written in place or in the local it names)."""
    role = body.get("role", "")
    if "${" not in role:
        return [role]
    over = str(body.get("for_each", ""))
    named = re.fullmatch(r"\$\{local\.(\w+)\}", over)
    if named:
        over = str(local(named.group(1)))
    literal = re.findall(r"roles/[A-Za-z0-9_.]+", over)
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


def test_bigtable_grants_are_on_the_instance_not_the_project():
    bigtable = sorted((k, n) for k, n, r in iam_grants() if r.startswith("roles/bigtable."))
    assert bigtable == [
        ("google_bigtable_instance_iam_member", "controller_reads_graph_tables"),
        ("google_bigtable_instance_iam_member", "setup_bigtable"),
        ("google_bigtable_instance_iam_member", "worker_bigtable"),
    ]
    for grant in resources("google_bigtable_instance_iam_member").values():
        assert grant["instance"] == "${var.bigtable_instance}"
    # The controller reads the graph's metadata cell and done markers: read-only.
    reads = resources("google_bigtable_instance_iam_member")["controller_reads_graph_tables"]
    assert reads["role"] == "roles/bigtable.reader"
    assert reads["member"] == "${google_service_account.controller.member}"


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
        "roles/monitoring.viewer",
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


def test_the_controller_publishes_alerts_and_kicks_only():
    """Alerts, and the tail watch's hand-offs to on_kick (shared/control/advance_watch.py)."""
    grants = resources("google_pubsub_topic_iam_member")
    mine = {
        name: body
        for name, body in grants.items()
        if body.get("member") == "${google_service_account.controller.member}"
    }
    assert {body["role"] for body in mine.values()} == {"roles/pubsub.publisher"}
    topics = sorted(body["topic"] for body in mine.values())
    assert [t.split('"')[1] if '"' in t else t for t in topics] == ["alerts", "kick"], topics


def test_retries_are_on():
    for name, body in resources("google_pubsub_subscription").items():
        if "push_config" not in body:
            continue
        retry = one(body["retry_policy"])
        assert retry["minimum_backoff"] == "10s" and retry["maximum_backoff"] == "600s", name
        # the local stack's trigger subscriptions back off as these do
        low, high = TRIGGER_RETRY_BACKOFF_S
        assert (retry["minimum_backoff"], retry["maximum_backoff"]) == (f"{low}s", f"{high}s")
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


# --- a fresh, secure-by-default project (docs/deploying.md), one test per finding ---------------


def kubernetes_manifest(operators: list[dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """k8s/pipeline-kubernetes.yaml rendered as outputs.tf renders it (templatefile), with
    the template's variables checked against the ones the output passes."""
    template = (TERRAFORM / "k8s" / "pipeline-kubernetes.yaml").read_text()
    outputs = {k: v for block in TF["output"] for k, v in block.items()}
    rendered = outputs["pipeline_kubernetes_manifest"]["value"]
    assert "k8s/pipeline-kubernetes.yaml" in rendered
    values = {
        "namespace": "cave-pipeline",
        "worker_ksa": "pipeline-worker",
        "worker_gsa": "w@p.iam.gserviceaccount.com",
        "setup_ksa": "pipeline-setup",
        "setup_gsa": "s@p.iam.gserviceaccount.com",
        "controller_subjects": json.dumps([{"kind": "User", "name": "c@p.iam"}]),
        "operator_subjects": json.dumps(operators or []),
    }
    used = set(re.findall(r"(?<!\$)\$\{(\w+)\}", template))
    assert used == set(values)
    assert all(f"{name} " in rendered or f"{name}=" in rendered for name in used), rendered
    text = re.sub(r"(?<!\$)\$\{(\w+)\}", lambda m: values[m.group(1)], template)
    return [d for d in yaml.safe_load_all(text.replace("$${", "${")) if d]


def kinds(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def rules_of(role: dict[str, Any]) -> dict[tuple[str, str], list[str]]:
    return {
        (group, resource): sorted(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


def test_1_setup_pods_have_their_own_identity_that_may_create_the_table():
    setup = resources("google_bigtable_instance_iam_member")["setup_bigtable"]
    assert setup["role"] == "roles/bigtable.admin"
    assert setup["member"] == "${google_service_account.setup.member}"
    worker = resources("google_bigtable_instance_iam_member")["worker_bigtable"]
    assert worker["role"] == "roles/bigtable.user"
    assert worker["member"] == "${google_service_account.worker.member}"
    assert "setup" in resources("google_service_account")
    # each Kubernetes service account acts as its own Google account
    accounts = local("pod_accounts")
    assert accounts["worker"]["ksa"] == "${var.worker_ksa}"
    assert accounts["setup"]["ksa"] == "${var.setup_ksa}"
    assert accounts["setup"]["gsa"] == "${google_service_account.setup}"
    binding = resources("google_service_account_iam_member")["pod_workload_identity"]
    assert binding["for_each"] == "${local.pod_accounts}"
    assert binding["role"] == "roles/iam.workloadIdentityUser"
    assert "[${var.namespace}/${each.value.ksa}]" in binding["member"]
    # ... and those service accounts exist in the namespace, annotated for Workload Identity
    sas = kinds(kubernetes_manifest(), "ServiceAccount")
    assert {
        n: sa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"] for n, sa in sas.items()
    } == {
        "pipeline-worker": "w@p.iam.gserviceaccount.com",
        "pipeline-setup": "s@p.iam.gserviceaccount.com",
    }
    # the config's defaults name them, so setup Jobs run as the setup account out of the box
    defaults = WorkloadIdentity()
    assert (defaults.ksa, defaults.setup_ksa) == (
        variable_default("worker_ksa"),
        variable_default("setup_ksa"),
    )


def test_2_private_nodes_reach_the_internet_through_cloud_nat():
    assert local("create_nat") == "${var.private_nodes && var.cloud_nat}"
    assert variable_default("private_nodes") is True and variable_default("cloud_nat") is True
    router = resources("google_compute_router")["nat"]
    nat = resources("google_compute_router_nat")["nat"]
    assert router["count"] == nat["count"] == "${local.create_nat ? 1 : 0}"
    assert router["network"] == "${local.network}"
    assert nat["router"] == "${google_compute_router.nat[0].name}"
    assert nat["source_subnetwork_ip_ranges_to_nat"] == "LIST_OF_SUBNETWORKS"
    covered = one(nat["subnetwork"])
    assert covered["name"] == "${local.subnetwork}"
    assert covered["source_ip_ranges_to_nat"] == ["ALL_IP_RANGES"]  # pods' range too


def test_3_functions_reach_the_control_plane_by_its_dns_endpoint():
    cluster = resources("google_container_cluster")["pipeline"]
    dns = one(one(cluster["control_plane_endpoints_config"])["dns_endpoint_config"])
    assert dns["allow_external_traffic"] is True
    assert local("gke_dns_endpoint") == (
        "${google_container_cluster.pipeline.control_plane_endpoints_config[0]"
        ".dns_endpoint_config[0].endpoint}"
    )
    env = local("function_env")
    assert env["PIPELINE_GKE_ENDPOINT"] == "${local.gke_dns_endpoint}"
    assert "PIPELINE_GKE_CA" not in env  # a publicly trusted certificate
    # the IP allow-list is no longer how the functions get in
    assert variable_default("control_plane_google_cidrs") is False
    networks = one(cluster["master_authorized_networks_config"])
    assert networks["gcp_public_cidrs_access_enabled"] == "${var.control_plane_google_cidrs}"
    # the provider has the block from 6.11 on
    providers = one(one(TF["terraform"])["required_providers"])
    assert providers["google"]["version"] == "~> 6.11"
    # Cloud Build redeploys with the same endpoint
    cloudbuild = (TERRAFORM.parent / "cloudbuild.yaml").read_text()
    assert "controlPlaneEndpointsConfig.dnsEndpointConfig.endpoint" in cloudbuild
    assert "PIPELINE_GKE_CA" not in cloudbuild


def test_4_data_buckets_are_granted_to_the_pods_as_declared():
    for block in TF["variable"]:
        if "data_buckets" in block:
            declared = block["data_buckets"]
    assert declared["default"] == []
    assert "access" in str(declared["type"]) and "name" in str(declared["type"])
    grant = resources("google_storage_bucket_iam_member")["pods_data"]
    assert grant["for_each"] == "${local.data_bucket_grants}"
    assert grant["bucket"] == "${each.value.bucket}" and grant["role"] == "${each.value.role}"
    assert grant["member"] == "${local.pod_accounts[each.value.account].gsa.member}"
    grants = str(local("data_bucket_grants"))
    assert "setproduct(var.data_buckets, keys(local.pod_accounts))" in grants
    # read-write -> objectUser, anything else (read-only) -> objectViewer
    assert re.search(
        r'access == "read-write" \? "roles/storage.objectUser" : "roles/storage.objectViewer"',
        grants,
    )


def test_5_the_cluster_names_its_network_and_assumes_no_default_vpc():
    cluster = resources("google_container_cluster")["pipeline"]
    assert cluster["network"] == "${local.network}"
    assert cluster["subnetwork"] == "${local.subnetwork}"
    assert variable_default("network") == variable_default("subnetwork") == ""
    assert local("create_network") == '${var.network == ""}'
    for kind in ("google_compute_network", "google_compute_subnetwork"):
        assert resources(kind)["pipeline"]["count"] == "${local.create_network ? 1 : 0}"
    subnet = resources("google_compute_subnetwork")["pipeline"]
    assert subnet["private_ip_google_access"] is True
    checks = one(cluster["lifecycle"])["precondition"]
    assert any(
        "var.network" in c["condition"] and "var.subnetwork" in c["condition"] for c in checks
    )


def test_6_the_projects_binary_authorization_policy_is_left_alone_by_default():
    assert variable_default("manage_binary_authorization_policy") is False
    policy = resources("google_binary_authorization_policy")["audit"]
    assert policy["count"] == "${var.manage_binary_authorization_policy ? 1 : 0}"


def test_7_functions_framework_decodes_pushes_without_attributes():
    project = tomllib.loads((TERRAFORM.parent / "pyproject.toml").read_text())["project"]
    pins = [
        Requirement(r)
        for r in project["optional-dependencies"]["controller"]
        if Requirement(r).name == "functions-framework"
    ]
    assert len(pins) == 1
    assert "3.10.2" in pins[0].specifier and "3.10.1" not in pins[0].specifier


def test_8_a_namespace_of_its_own_and_separate_controller_and_operator_roles():
    assert variable_default("namespace") not in ("default", "kube-system")
    docs = kubernetes_manifest([{"kind": "User", "name": "alice@lab.org"}])
    assert list(kinds(docs, "Namespace")) == ["cave-pipeline"]
    node_events = "cave-pipeline-node-events-cave-pipeline"
    for doc in docs:
        if doc["metadata"]["name"] == node_events:
            # events about Nodes are recorded in `default`: the one grant there, read only
            assert doc["metadata"]["namespace"] == "default", doc["metadata"]
        elif doc["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert doc["metadata"]["namespace"] == "cave-pipeline", doc["metadata"]
        kubernetes_validate.validate(doc, "1.33", strict=True)
    roles = kinds(docs, "Role")
    assert rules_of(roles["cave-pipeline-controller"]) == {
        ("batch", "jobs"): sorted(["create", "get", "list", "patch", "delete"]),
        # a hung pod is deleted (found missing by the real API server's RBAC)
        # ... and a deleted or paused layer's pods go in one sweep, the condemned ones of a
        # suspended Job released from the job-tracking finalizer
        ("", "pods"): ["delete", "deletecollection", "get", "list", "patch"],
        ("", "pods/resize"): ["patch"],  # apply's requests, given to running pods in place
        ("", "pods/log"): ["get", "list"],
        ("", "events"): ["get", "list"],
        ("", "configmaps"): ["create", "update"],  # the run's dataset file
    }
    assert rules_of(roles["cave-pipeline-operator"]) == {
        ("batch", "jobs"): ["get", "list"],
        ("", "pods"): ["get", "list"],
        ("", "pods/log"): ["get", "list"],
        ("", "events"): ["get", "list"],
        ("", "secrets"): ["create", "update"],  # `pipeline setup`'s credential files
        ("metrics.k8s.io", "pods"): ["get", "list"],  # `pipeline top`
    }
    # the nodes' OOMKilling events (shared/reconcile/node_oom.py): list events, nothing else
    assert rules_of(roles[node_events]) == {("", "events"): ["list"]}
    # nodes are cluster-scoped: the only cluster-wide grant, read-only node metrics
    (cluster_role,) = kinds(docs, "ClusterRole").values()
    assert rules_of(cluster_role) == {("metrics.k8s.io", "nodes"): ["get", "list"]}
    bindings = {**kinds(docs, "RoleBinding"), **kinds(docs, "ClusterRoleBinding")}
    assert {n: (b["roleRef"]["name"], b["subjects"]) for n, b in bindings.items()} == {
        "cave-pipeline-controller": (
            "cave-pipeline-controller",
            [{"kind": "User", "name": "c@p.iam"}],
        ),
        "cave-pipeline-operator": (
            "cave-pipeline-operator",
            [{"kind": "User", "name": "alice@lab.org"}],
        ),
        "cave-pipeline-node-metrics": (
            "cave-pipeline-node-metrics",
            [{"kind": "User", "name": "alice@lab.org"}],
        ),
        node_events: (node_events, [{"kind": "User", "name": "c@p.iam"}]),
    }


def test_9_the_functions_know_the_heartbeats_period():
    """The tail watch's budget and a tick's staleness come from PIPELINE_TICK_PERIOD_S; a
    scheduler slower than the functions believe would mark every tick stale."""
    env = local("function_env")
    assert env["PIPELINE_TICK_PERIOD_S"] == "${tostring(var.tick_period_minutes * 60)}"
    schedule = resources("google_cloud_scheduler_job")["tick"]["schedule"]
    assert "var.tick_period_minutes" in schedule
    assert variable_default("tick_period_minutes") == 1
    # Cloud Build redeploys with the same variable and terraform hands it the value
    cloudbuild = (TERRAFORM.parent / "cloudbuild.yaml").read_text()
    assert 'PIPELINE_TICK_PERIOD_S: "${_TICK_PERIOD_S}"' in cloudbuild
    outputs = {k: v for block in TF["output"] for k, v in block.items()}
    assert (
        "_TICK_PERIOD_S=${var.tick_period_minutes * 60}"
        in outputs["cloudbuild_substitutions"]["value"]
    )


def test_10_every_setting_the_functions_read_in_the_cloud_is_deployed():
    """Each PIPELINE_* variable the functions' cloud path reads is set by terraform and by
    Cloud Build's redeploy (local-only ones excepted), so a first deploy is not a default."""
    repo = TERRAFORM.parent
    read: set[str] = set()
    for path in [*(repo / "functions").glob("*.py"), repo / "adapters/wiring.py"]:
        read |= set(re.findall(r"PIPELINE_[A-Z_]+", path.read_text()))
    local_only = {"PIPELINE_KUBE_CONTEXT", "PIPELINE_GKE_CA"}  # kubeconfig / private CA paths
    tuning = {"PIPELINE_WATCH_BUDGET_S", "PIPELINE_WATCH_POLL_S"}  # derived from the period
    env = local("function_env")
    cloudbuild = (repo / "cloudbuild.yaml").read_text()
    for name in sorted(read - local_only - tuning):
        assert name in env, f"terraform/functions.tf function_env lacks {name}"
        assert f"{name}:" in cloudbuild, f"cloudbuild.yaml's functions-env lacks {name}"
