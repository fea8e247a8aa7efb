"""What a deploy of terraform/ creates, named from a config: the doctor's expectations.

Names follow terraform/ (main.tf, pubsub.tf, functions.tf, iam.tf, k8s/pipeline-kubernetes.yaml);
`common_name` is terraform's variable of that name (the cluster's name and the prefix of the
service accounts, sink and scheduler job). Pure module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.config.config import PipelineConfig

DEFAULT_COMMON_NAME = "cave-pipeline"

# terraform/main.tf `google_project_service.apis`, plus Compute Engine (Autopilot's nodes,
# and the region's quotas the doctor reads).
APIS: tuple[str, ...] = (
    "container.googleapis.com",
    "cloudfunctions.googleapis.com",
    "run.googleapis.com",
    "pubsub.googleapis.com",
    "firestore.googleapis.com",
    "cloudscheduler.googleapis.com",
    "cloudbuild.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "artifactregistry.googleapis.com",
    "iam.googleapis.com",
    "storage.googleapis.com",
    "binaryauthorization.googleapis.com",
    "compute.googleapis.com",
)

TOPICS: tuple[str, ...] = ("job-events", "ticks", "kick", "alerts", "dead-letters")
DEAD_LETTER_TOPIC = "dead-letters"
# functions.tf: function -> the topic feeding it through the push subscription <topic>-trigger
FUNCTIONS: dict[str, str] = {
    "on-job-event": "job-events",
    "on-tick": "ticks",
    "on-kick": "kick",
    "on-dead-letter": "dead-letters",
}
# pubsub.tf: pull subscriptions for people -> their topic
OPERATOR_SUBSCRIPTIONS: dict[str, str] = {
    "alerts-operator": "alerts",
    "dead-letters-operator": "dead-letters",
}
SERVICE_ACCOUNT_ROLES = (
    "worker",
    "setup",
    "controller",
    "invoker",
    "fn-build",
    "nodes",
    "deployer",
)


@dataclass(frozen=True)
class RoleRule:
    """One rule of a Kubernetes Role: verbs on resources of an API group."""

    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]


# k8s/pipeline-kubernetes.yaml: the controller's Role (Jobs, pod reads, the dataset ConfigMap).
CONTROLLER_ROLE: tuple[RoleRule, ...] = (
    RoleRule("batch", ("jobs",), ("create", "get", "list", "patch", "delete")),
    RoleRule("", ("pods", "pods/log", "events"), ("get", "list")),
    # A hung pod's delete; a deleted or paused layer's sweep and its finalizer release.
    RoleRule("", ("pods",), ("delete", "deletecollection", "patch")),
    RoleRule("", ("pods/resize",), ("patch",)),  # apply's in-place resize (1.33+)
    RoleRule("", ("configmaps",), ("create", "update")),
)
# The same manifest's Role in `default`, where events about Nodes are recorded: the nodes'
# OOMKilling events, counted as OOM kills (shared.reconcile.node_oom).
NODE_EVENTS_NAMESPACE = "default"
CONTROLLER_NODE_EVENTS_ROLE: tuple[RoleRule, ...] = (RoleRule("", ("events",), ("list",)),)
# The operators' Role: reads, the pods' Secret (`pipeline setup`), pods' usage (`pipeline top`).
OPERATOR_ROLE: tuple[RoleRule, ...] = (
    RoleRule("batch", ("jobs",), ("get", "list")),
    RoleRule("", ("pods", "pods/log", "events"), ("get", "list")),
    RoleRule("", ("secrets",), ("create", "update")),
    RoleRule("metrics.k8s.io", ("pods",), ("get", "list")),
)

# What the operator's own account needs for `pipeline start` and the reading commands:
# Firestore runs (datastore), the cluster's endpoint (container), a kick (pubsub, on `kick`).
OPERATOR_PROJECT_PERMISSIONS: tuple[str, ...] = (
    "datastore.entities.create",
    "datastore.entities.get",
    "datastore.entities.list",
    "datastore.entities.update",
    "container.clusters.get",
)
OPERATOR_KICK_PERMISSIONS: tuple[str, ...] = ("pubsub.topics.publish",)


@dataclass(frozen=True)
class Deployment:
    """The resources a deploy of terraform/ for `cfg` consists of."""

    project: str
    region: str
    namespace: str
    common_name: str
    worker_ksa: str
    worker_email: str
    bigtable_project: str
    bigtable_instance: str
    graph_table: str
    # (stage, table) of the tables the run's stages write besides the graph's (the demo's
    # l2cache and meshing tables): `pipeline setup` makes them (scripts.run_tables).
    stage_tables: tuple[tuple[str, str], ...] = ()
    apis: tuple[str, ...] = APIS
    topics: tuple[str, ...] = TOPICS
    functions: dict[str, str] = field(default_factory=lambda: dict(FUNCTIONS))

    def email(self, role: str) -> str:
        """The e-mail of the `<common_name>-<role>` service account (the worker's from the
        config when it names one)."""
        if role == "worker":
            return self.worker_email
        return f"{self.common_name}-{role}@{self.project}.iam.gserviceaccount.com"

    @property
    def cluster(self) -> str:
        return self.common_name

    @property
    def sink(self) -> str:
        return f"{self.common_name}-job-events"

    @property
    def scheduler_job(self) -> str:
        return f"{self.common_name}-tick"

    @property
    def workload_identity_member(self) -> str:
        return f"serviceAccount:{self.project}.svc.id.goog[{self.namespace}/{self.worker_ksa}]"

    def trigger_subscriptions(self) -> dict[str, str]:
        """Push subscription -> the function it feeds (`<topic>-trigger`)."""
        return {f"{topic}-trigger": fn for fn, topic in self.functions.items()}

    def topic_path(self, topic: str) -> str:
        return f"projects/{self.project}/topics/{topic}"


def common_name_of(cfg: PipelineConfig) -> str:
    """terraform's `common_name`, read back from the worker's account e-mail
    (`<common_name>-worker@...`) when the config names one; else terraform's default."""
    local = cfg.workload_identity.gsa_email.split("@")[0]
    if local.endswith("-worker") and len(local) > len("-worker"):
        return local.removesuffix("-worker")
    return DEFAULT_COMMON_NAME


def deployment_of(cfg: PipelineConfig, common_name: str | None = None) -> Deployment:
    """The deployment `cfg` runs on (`common_name`: terraform's, if not the default)."""
    name = common_name or common_name_of(cfg)
    worker = (
        cfg.workload_identity.gsa_email or f"{name}-worker@{cfg.project}.iam.gserviceaccount.com"
    )
    return Deployment(
        project=cfg.project,
        region=cfg.region,
        namespace=cfg.namespace,
        common_name=name,
        worker_ksa=cfg.workload_identity.ksa,
        worker_email=worker,
        bigtable_project=cfg.bigtable.project,
        bigtable_instance=cfg.bigtable.instance,
        graph_table=cfg.graph_id,
    )
