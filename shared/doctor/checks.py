"""The doctor's checks: each a function from the facts an adapter fetched (REST JSON shapes,
see shared.doctor.facts) and the expected deployment to a verdict, what was found, and the
fix. `CHECKS` lists them in the order they are shown; `Check.cheap` marks the subset
`pipeline start` runs first, `Check.local` the ones that apply to the local stack. Pure module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.doctor.deployment import (
    DEAD_LETTER_TOPIC,
    OPERATOR_SUBSCRIPTIONS,
    SERVICE_ACCOUNT_ROLES,
    Deployment,
)
from shared.doctor.facts import Denied, members_with, roles_of
from shared.doctor.verdicts import CheckResult, Verdict

Facts = Mapping[str, Any]
Outcome = tuple[Verdict, str, str]  # verdict, detail, fix

APPLY = "run `terraform apply` in terraform/ (docs/deploying.md)"
LOGIN = "gcloud auth application-default login"
# What to do about a check that got no answer: in the cloud, retry or renew the credentials;
# on the local stack (emulators, no credentials) start the stack or drop its stale addresses.
CLOUD_UNREACHABLE_FIX = f"retry; or {LOGIN}"
LOCAL_UNREACHABLE_FIX = (
    "start the local stack (`pipeline local up` in this folder), or unset the "
    "*_EMULATOR_HOST variables a stopped stack left behind"
)


def _ok(detail: str) -> Outcome:
    return Verdict.PASS, detail, ""


def _fail(detail: str, fix: str) -> Outcome:
    return Verdict.FAIL, detail, fix


def _denied(denied: Denied, grant: str) -> Outcome:
    return _fail(str(denied), f"ask for {grant} on the project (or run as a project Owner)")


# --- APIs -------------------------------------------------------------------------------------


def check_apis(facts: Facts, dep: Deployment) -> Outcome:
    states = facts["states"]
    if isinstance(states, Denied):
        return _denied(states, "roles/serviceusage.serviceUsageViewer")
    off = [api for api in dep.apis if states.get(api) != "ENABLED"]
    if off:
        return _fail(
            f"not enabled: {', '.join(off)}",
            f"gcloud services enable {' '.join(off)} --project={dep.project} (or {APPLY})",
        )
    return _ok(f"{len(dep.apis)} APIs enabled")


# --- Firestore --------------------------------------------------------------------------------


def check_firestore(facts: Facts, dep: Deployment) -> Outcome:
    if facts.get("local"):
        return _ok(f"emulator at {facts['address']} answers for project {dep.project}")
    db = facts["database"]
    if isinstance(db, Denied):
        return _denied(db, "roles/datastore.viewer")
    if db is None:
        return _fail(
            f"no (default) Firestore database in {dep.project}",
            f"{APPLY} (create_firestore_database = true), or "
            f"gcloud firestore databases create --location={dep.region} --project={dep.project}",
        )
    if db.get("type") != "FIRESTORE_NATIVE":
        return _fail(
            f"the (default) database is in {db.get('type')} mode; the run store needs Native",
            "a project's (default) database cannot change mode: use another project, or an "
            "empty Datastore-mode database can be switched in the console",
        )
    return _ok(f"(default) database, Native mode, {db.get('locationId', '?')}")


# --- Pub/Sub ----------------------------------------------------------------------------------


def _missing_or_denied(found: Mapping[str, Any], names: list[str]) -> tuple[list[str], list[str]]:
    missing = [n for n in names if found.get(n) is None]
    denied = [str(found[n]) for n in names if isinstance(found.get(n), Denied)]
    return missing, denied


def check_pubsub(facts: Facts, dep: Deployment) -> Outcome:
    topics, subs = facts["topics"], facts["subscriptions"]
    if facts.get("local"):
        missing, _ = _missing_or_denied(topics, list(topics))
        missing_subs, _ = _missing_or_denied(subs, list(subs))
        if missing or missing_subs:
            return _fail(
                f"missing on the local stack: {', '.join(missing + missing_subs)}",
                "restart the local stack (`pipeline local down`, then `pipeline local up`): "
                "it creates its topics and subscriptions",
            )
        return _ok(f"topics {', '.join(topics)}; subscriptions {', '.join(subs)}")
    missing, denied = _missing_or_denied(topics, list(dep.topics))
    missing_subs, denied_subs = _missing_or_denied(subs, list(subs))
    if denied or denied_subs:
        return _denied(Denied("; ".join(denied + denied_subs)), "roles/pubsub.viewer")
    if missing or missing_subs:
        return _fail(f"missing: {', '.join(missing + missing_subs)}", APPLY)
    problems: list[str] = []
    dead_letters = dep.topic_path(DEAD_LETTER_TOPIC)
    invoker = dep.email("invoker")
    for name in dep.trigger_subscriptions():
        sub = subs[name]
        push = sub.get("pushConfig") or {}
        if not push.get("pushEndpoint"):
            problems.append(f"{name} does not push to its function")
        elif (push.get("oidcToken") or {}).get("serviceAccountEmail") != invoker:
            problems.append(f"{name} pushes without a token of {invoker}")
        policy = sub.get("deadLetterPolicy") or {}
        if name != f"{DEAD_LETTER_TOPIC}-trigger" and policy.get("deadLetterTopic") != dead_letters:
            problems.append(f"{name} has no dead-letter policy to {DEAD_LETTER_TOPIC}")
    agent = facts.get("pubsub_agent", "")
    publish = facts.get("dead_letters_policy")
    if isinstance(publish, Denied):
        problems.append(str(publish))
    elif agent and agent not in members_with(publish, "roles/pubsub.publisher"):
        problems.append(f"the Pub/Sub service agent ({agent}) may not publish dead letters")
    if problems:
        return _fail("; ".join(problems), APPLY)
    return _ok(
        f"{len(dep.topics)} topics; {len(subs)} subscriptions; triggers dead-letter to "
        f"{DEAD_LETTER_TOPIC}"
    )


def expected_subscriptions(dep: Deployment) -> list[str]:
    """Every subscription a deploy creates: the push triggers and the operators' pulls."""
    return [*dep.trigger_subscriptions(), *OPERATOR_SUBSCRIPTIONS]


# --- The log sink -----------------------------------------------------------------------------


def check_log_sink(facts: Facts, dep: Deployment) -> Outcome:
    sink = facts["sink"]
    if isinstance(sink, Denied):
        return _denied(sink, "roles/logging.viewer")
    if sink is None:
        return _fail(f"no log sink {dep.sink}: no Job events reach the controller", APPLY)
    want = f"pubsub.googleapis.com/{dep.topic_path('job-events')}"
    if sink.get("destination") != want:
        return _fail(f"{dep.sink} writes to {sink.get('destination')}, not {want}", APPLY)
    if sink.get("disabled"):
        return _fail(
            f"{dep.sink} is disabled", f"gcloud logging sinks update {dep.sink} --no-disabled"
        )
    namespace = f'jsonPayload.involvedObject.namespace="{dep.namespace}"'
    if namespace not in sink.get("filter", ""):
        return _fail(
            f"{dep.sink}'s filter does not select namespace {dep.namespace}: the config's "
            "namespace differs from terraform's",
            "set terraform's `namespace` to the config's, then apply",
        )
    writer = sink.get("writerIdentity", "")
    policy = facts["job_events_policy"]
    if isinstance(policy, Denied):
        return _denied(policy, "roles/pubsub.viewer")
    if writer not in members_with(policy, "roles/pubsub.publisher"):
        return _fail(
            f"the sink's writer {writer or '(none)'} may not publish to job-events",
            f"gcloud pubsub topics add-iam-policy-binding job-events --member={writer} "
            f"--role=roles/pubsub.publisher --project={dep.project} (or {APPLY})",
        )
    return _ok(f"{dep.sink} -> job-events; its writer may publish")


# --- Cloud Scheduler --------------------------------------------------------------------------


def check_scheduler(facts: Facts, dep: Deployment) -> Outcome:
    job = facts["job"]
    if isinstance(job, Denied):
        return _denied(job, "roles/cloudscheduler.viewer")
    if job is None:
        return _fail(
            f"no Scheduler job {dep.scheduler_job} in {dep.region}: no ticks, so no ramps, "
            "stall alerts or missed events",
            APPLY,
        )
    target = (job.get("pubsubTarget") or {}).get("topicName")
    if target != dep.topic_path("ticks"):
        return _fail(f"{dep.scheduler_job} publishes to {target}, not ticks", APPLY)
    if job.get("state") != "ENABLED":
        return _fail(
            f"{dep.scheduler_job} is {job.get('state')}",
            f"gcloud scheduler jobs resume {dep.scheduler_job} --location={dep.region}",
        )
    return _ok(f"{dep.scheduler_job}: {job.get('schedule')} -> ticks, enabled")


# --- The functions ----------------------------------------------------------------------------


def check_functions(facts: Facts, dep: Deployment) -> Outcome:
    found = facts["functions"]
    missing, denied = _missing_or_denied(found, list(dep.functions))
    if denied:
        return _denied(Denied("; ".join(denied)), "roles/cloudfunctions.viewer")
    if missing:
        return _fail(f"missing in {dep.region}: {', '.join(missing)}", APPLY)
    controller = dep.email("controller")
    problems = []
    for name in dep.functions:
        fn = found[name]
        if fn.get("state") != "ACTIVE":
            problems.append(f"{name} is {fn.get('state')}")
        account = (fn.get("serviceConfig") or {}).get("serviceAccountEmail")
        if account != controller:
            problems.append(f"{name} runs as {account}, not {controller}")
    if problems:
        return _fail(
            "; ".join(problems),
            f"{APPLY}; a failed deploy shows its reason in "
            f"`gcloud functions describe NAME --region={dep.region}`",
        )
    return _ok(f"{', '.join(dep.functions)}: active, as {controller}")


# --- Bigtable ---------------------------------------------------------------------------------


def check_bigtable_instance(facts: Facts, dep: Deployment) -> Outcome:
    where = f"{dep.bigtable_project}/{dep.bigtable_instance}"
    if facts.get("local"):
        return Verdict.SKIP, "local stack: the Bigtable emulator has no instances", ""
    instance = facts["instance"]
    if isinstance(instance, Denied):
        return _denied(instance, "roles/bigtable.viewer on the instance")
    if instance is None:
        return _fail(
            f"no Bigtable instance {where}",
            f"create it (gcloud bigtable instances create {dep.bigtable_instance} "
            f"--project={dep.bigtable_project} ...), or fix bigtable.instance in the config",
        )
    if instance.get("state") != "READY":
        return _fail(f"instance {where} is {instance.get('state')}", "wait until it is READY")
    return _ok(f"{where}: {instance.get('type', '?')}, ready")


def check_graph_table(facts: Facts, dep: Deployment) -> Outcome:
    """The graph's table, then the tables the stages write besides it (`stage_tables`)."""
    graph = _graph_table(facts, dep)
    if facts.get("skip") or not dep.stage_tables:
        return graph
    verdict, detail, fix = _stage_tables(facts.get("stage_tables") or {}, dep)
    if verdict is Verdict.PASS:
        return graph[0], f"{graph[1]}; {detail}", graph[2]
    if graph[0] is Verdict.FAIL:
        return verdict, f"{graph[1]}; {detail}", f"{graph[2]}; then {fix}"
    return verdict, f"{graph[1]}; {detail}", fix


def _graph_table(facts: Facts, dep: Deployment) -> Outcome:
    table = dep.graph_table
    if facts.get("skip"):
        return Verdict.SKIP, facts["skip"], ""
    if isinstance(facts.get("exists"), Denied):
        return _denied(facts["exists"], "roles/bigtable.viewer on the instance")
    if not facts["exists"]:
        return _ok(f"table {table} absent: the ingest setup creates it")
    meta = facts.get("meta")
    if meta == "none":
        if facts.get("image_ingest"):
            return (
                Verdict.WARN,
                f"table {table} exists without graph metadata: the image's ingest setup "
                "creates the table itself and a half-made one is left from an earlier attempt",
                f"delete it (cbt -project {dep.bigtable_project} -instance "
                f"{dep.bigtable_instance} deletetable {table}) unless a build of it is meant "
                "to go on",
            )
        return _ok(f"table {table} exists, no graph metadata yet: the setup pass writes it")
    if facts.get("mismatch"):
        return _fail(
            f"table {table}: {facts['mismatch']}",
            f"fix data_source.size, or delete the table (cbt -project {dep.bigtable_project} "
            f"-instance {dep.bigtable_instance} deletetable {table}) for the setup pass to make "
            "it anew",
        )
    return _ok(f"table {table} exists with graph metadata ({facts.get('meta_detail', meta)})")


def _stage_tables(found: Facts, dep: Deployment) -> Outcome:
    """The stage tables: all there (PASS), or which are missing or cannot be read (FAIL)."""
    denied = [str(v) for v in found.values() if isinstance(v, Denied)]
    if denied:
        return _denied(Denied("; ".join(denied)), "roles/bigtable.viewer on the instance")
    missing = [f"{table} ({stage})" for stage, table in dep.stage_tables if not found.get(table)]
    if missing:
        return _fail(
            f"missing: {', '.join(missing)}: every chunk of that stage would fail writing there",
            "`pipeline setup -c <this config>` creates the tables each configured stage needs",
        )
    return _ok(", ".join(f"{table} ({stage})" for stage, table in dep.stage_tables) + " exist")


# --- Accounts and grants ----------------------------------------------------------------------


def check_service_accounts(facts: Facts, dep: Deployment) -> Outcome:
    found = facts["accounts"]
    emails = {role: dep.email(role) for role in SERVICE_ACCOUNT_ROLES}
    missing, denied = _missing_or_denied(found, list(emails))
    if denied:
        return _denied(Denied("; ".join(denied)), "roles/iam.serviceAccountViewer")
    if missing:
        return _fail(f"missing: {', '.join(emails[r] for r in missing)}", APPLY)
    disabled = [emails[r] for r in emails if found[r].get("disabled")]
    if disabled:
        return _fail(
            f"disabled: {', '.join(disabled)}",
            " ; ".join(f"gcloud iam service-accounts enable {e}" for e in disabled),
        )
    return _ok(f"{len(emails)} accounts ({dep.common_name}-*)")


# role on the project -> the account (by its role in the deployment) that needs it
PROJECT_GRANTS: tuple[tuple[str, str], ...] = (
    ("controller", "roles/datastore.user"),
    ("controller", "roles/container.clusterViewer"),
    # Bigtable's CPU load for the ramp's gate; without it the ramp runs ungated
    ("controller", "roles/monitoring.viewer"),
    ("nodes", "roles/container.defaultNodeServiceAccount"),
    ("fn-build", "roles/logging.logWriter"),
)
WORKER_BIGTABLE_ROLES = {"roles/bigtable.user", "roles/bigtable.admin"}


def check_grants(facts: Facts, dep: Deployment) -> Outcome:
    project, instance, alerts, kick = (
        facts["project_policy"],
        facts["instance_policy"],
        facts["alerts_policy"],
        facts["kick_policy"],
    )
    for policy, grant in (
        (project, "roles/iam.securityReviewer"),
        (instance, "roles/bigtable.viewer on the instance"),
        (alerts, "roles/pubsub.viewer"),
        (kick, "roles/pubsub.viewer"),
    ):
        if isinstance(policy, Denied):
            return _denied(policy, grant)
    lacking: list[str] = []
    for role_of, role in PROJECT_GRANTS:
        member = f"serviceAccount:{dep.email(role_of)}"
        if member not in members_with(project, role):
            lacking.append(f"{dep.email(role_of)} lacks {role} on the project")
    controller = f"serviceAccount:{dep.email('controller')}"
    if controller not in members_with(alerts, "roles/pubsub.publisher"):
        lacking.append(f"{dep.email('controller')} may not publish alerts")
    if controller not in members_with(kick, "roles/pubsub.publisher"):
        # the tick's tail watch hands a layer that finished in its last seconds to a kick
        lacking.append(
            f"{dep.email('controller')} may not publish kicks (the tail watch's hand-offs "
            "then fail and those layers wait for the next tick; terraform/iam.tf "
            "controller_publishes_kicks)"
        )
    worker = f"serviceAccount:{dep.worker_email}"
    if not roles_of(instance, worker) & WORKER_BIGTABLE_ROLES:
        lacking.append(f"{dep.worker_email} has no Bigtable role on {dep.bigtable_instance}")
    admins = [
        m
        for m in members_with(instance, "roles/bigtable.admin")
        if m.startswith("serviceAccount:") and m.endswith(".gserviceaccount.com")
    ]
    if not admins and "roles/bigtable.admin" not in roles_of(instance, worker):
        lacking.append(
            f"no pod account holds roles/bigtable.admin on {dep.bigtable_instance}: the setup "
            "pass cannot create the graph table"
        )
    bucket_reads = facts.get("bucket_policies", {})
    for bucket, policy in bucket_reads.items():
        if isinstance(policy, Denied):
            continue  # the data-paths check reports what the operator cannot read
        if not roles_of(policy, worker) & BUCKET_READ_ROLES:
            lacking.append(f"{dep.worker_email} cannot read gs://{bucket}")
    if lacking:
        return _fail("; ".join(lacking), APPLY)
    return _ok("project, topic, instance and bucket grants in place")


BUCKET_READ_ROLES = {
    "roles/storage.objectViewer",
    "roles/storage.objectUser",
    "roles/storage.objectAdmin",
    "roles/storage.admin",
    "roles/storage.legacyBucketReader",
}


def check_operator_permissions(facts: Facts, dep: Deployment) -> Outcome:
    problems = []
    for scope in ("project", "kick"):
        answer = facts[scope]
        if isinstance(answer, Denied):
            problems.append(str(answer))
            continue
        lacking = sorted(set(answer["asked"]) - set(answer.get("granted", [])))
        if lacking:
            problems.append(f"{scope}: lacking {', '.join(lacking)}")
    if problems:
        return _fail(
            f"{facts.get('who', 'you')}: " + "; ".join(problems),
            "add yourself to terraform's `operator_members` and apply (Firestore, cluster "
            "viewer, publish on kick)",
        )
    return _ok(f"{facts.get('who', 'you')} may write runs, read the cluster and kick")


def check_workload_identity(facts: Facts, dep: Deployment) -> Outcome:
    policy = facts["worker_policy"]
    if isinstance(policy, Denied):
        return _denied(policy, "roles/iam.serviceAccountViewer")
    if policy is None:
        return _fail(f"no service account {dep.worker_email}", APPLY)
    member = dep.workload_identity_member
    if member not in members_with(policy, "roles/iam.workloadIdentityUser"):
        return _fail(
            f"{member} may not act as {dep.worker_email}: pods get no Google identity",
            f"gcloud iam service-accounts add-iam-policy-binding {dep.worker_email} "
            f"--role=roles/iam.workloadIdentityUser --member='{member}' (or {APPLY} with "
            "this namespace and worker_ksa)",
        )
    return _ok(f"{dep.namespace}/{dep.worker_ksa} acts as {dep.worker_email}")


# --- The cluster ------------------------------------------------------------------------------


def check_cluster(facts: Facts, dep: Deployment) -> Outcome:
    cluster = facts["cluster"]
    if isinstance(cluster, Denied):
        return _denied(cluster, "roles/container.clusterViewer")
    if cluster is None:
        return _fail(f"no cluster {dep.cluster} in {dep.region}", APPLY)
    if cluster.get("status") != "RUNNING":
        return _fail(f"{dep.cluster} is {cluster.get('status')}", "wait until it is RUNNING")
    dns = ((cluster.get("controlPlaneEndpointsConfig") or {}).get("dnsEndpointConfig")) or {}
    if not dns.get("endpoint") or not dns.get("allowExternalTraffic"):
        return _fail(
            f"{dep.cluster} has no DNS-based control-plane endpoint open to Google's network",
            f"gcloud container clusters update {dep.cluster} --region={dep.region} "
            f"--enable-dns-access (or {APPLY})",
        )
    reach = facts.get("reach") or {}
    if reach.get("error"):
        return _fail(
            f"{dns['endpoint']}: {reach['error']}",
            "the DNS endpoint admits callers by IAM: you need container.clusters.connect "
            "(roles/container.clusterViewer)",
        )
    version = _k8s_version(reach.get("version", ""))
    if version and version < MIN_KUBERNETES:
        return _fail(
            f"{dep.cluster} runs Kubernetes {reach['version']}: the layer Jobs' "
            "backoffLimitPerIndex and podReplacementPolicy need "
            f"{'.'.join(map(str, MIN_KUBERNETES))} or later",
            f"gcloud container clusters upgrade {dep.cluster} --region={dep.region} --master "
            "(or move it to the REGULAR release channel)",
        )
    return _ok(f"{dep.cluster} running; {dns['endpoint']} answers ({reach.get('version', '?')})")


MIN_KUBERNETES = (1, 29)  # backoffLimitPerIndex, podReplacementPolicy on by default (beta)


def _k8s_version(git_version: str) -> tuple[int, int] | None:
    """(major, minor) of a server's gitVersion such as "v1.33.5-gke.1000"."""
    parts = git_version.lstrip("v").split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def check_namespace(facts: Facts, dep: Deployment) -> Outcome:
    ns = facts["namespace"]
    if ns == "unreached":
        return Verdict.SKIP, "the cluster was not reached (see the cluster check)", ""
    if isinstance(ns, Denied):
        return Verdict.SKIP, f"{ns}: whether it exists cannot be told", ""
    if ns is None:
        return _fail(
            f"no namespace {dep.namespace}",
            "terraform -chdir=terraform output -raw pipeline_kubernetes_manifest | kubectl apply "
            "-f - (the namespace, the pods' service accounts and the Roles)",
        )
    return _ok(f"namespace {dep.namespace}: {(ns.get('status') or {}).get('phase', '?')}")


def check_rbac(facts: Facts, dep: Deployment) -> Outcome:
    operator = facts["operator"]
    if operator == "unreached":
        return Verdict.SKIP, "the cluster was not reached (see the cluster check)", ""
    denied = [verb for verb, allowed in operator.items() if not allowed]
    problems = [f"you may not {', '.join(denied)}"] if denied else []
    controller = facts.get("controller")
    if isinstance(controller, Mapping):
        refused = [verb for verb, allowed in controller.items() if not allowed]
        if refused:
            problems.append(f"{dep.email('controller')} may not {', '.join(refused)}")
    if problems:
        return _fail(
            "; ".join(problems) + f" in {dep.namespace}",
            "terraform -chdir=terraform output -raw pipeline_kubernetes_manifest | "
            "kubectl apply -f - (as a cluster admin; add yourself to operator_members first)",
        )
    note = (
        ""
        if isinstance(controller, Mapping)
        else "; the controller's not checked (that needs a cluster admin)"
    )
    return _ok(f"{len(operator)} verbs allowed in {dep.namespace}{note}")


# --- Images, quota, data ----------------------------------------------------------------------


def check_images(facts: Facts, dep: Deployment) -> Outcome:
    images = facts["images"]
    if not images:
        return Verdict.SKIP, "the config names no images", ""
    bad = [f"{i['stage']}: {i['ref']} ({i['why']})" for i in images if i["found"] is False]
    unknown = [f"{i['stage']}: {i['ref']} ({i['why']})" for i in images if i["found"] is None]
    if bad:
        return _fail(
            "not found: " + "; ".join(bad),
            "push the image (cloudbuild.yaml) or fix `images` in the config",
        )
    if unknown:
        return Verdict.WARN, "not checked: " + "; ".join(unknown), "check these by hand"
    return _ok(f"{len(images)} image(s) resolve")


SPOT_HEADROOM = 0.8  # Autopilot nodes carry system pods and bin-packing slack


def check_spot_quota(facts: Facts, dep: Deployment) -> Outcome:
    region = facts["region"]
    need, planned = facts["need"], facts["planned"]
    if isinstance(region, Denied):
        return _denied(region, "roles/compute.viewer")
    if region is None:
        return _fail(f"no region {dep.region}", "fix `region` in the config")
    quotas = {q.get("metric"): q for q in region.get("quotas", [])}
    metric = "PREEMPTIBLE_CPUS" if need.spot else "CPUS"
    quota = quotas.get(metric) or {}
    if metric == "PREEMPTIBLE_CPUS" and not quota.get("limit"):
        metric, quota = "CPUS", quotas.get("CPUS") or {}  # Spot then draws on the CPUS quota
    free = float(quota.get("limit", 0)) - float(quota.get("usage", 0))
    what = (
        f"{planned:g} vCPU planned ({need.stage} L{need.layer}: {need.pods} pods x "
        f"{need.vcpu_per_pod:g}); {metric} in {dep.region}: {free:g} free of "
        f"{float(quota.get('limit', 0)):g}"
    )
    fix = (
        f"request more {metric} quota in {dep.region} (console: IAM & Admin, Quotas), or lower "
        "job.ramp.max / set controller.max_vcpus"
    )
    if planned > free:
        return _fail(what, fix)
    if planned > SPOT_HEADROOM * free:
        return Verdict.WARN, what + f" (over {SPOT_HEADROOM:.0%} of it)", fix
    return _ok(what)


def check_data_paths(facts: Facts, dep: Deployment) -> Outcome:
    paths, empty = facts["paths"], facts.get("empty") or []
    if empty:
        return _fail(
            f"{', '.join(empty)} empty: there is no input to build from (every setup and "
            "layer pod would fail on it)",
            facts.get("empty_fix") or "set it in the dataset file",
        )
    if not paths:
        return Verdict.SKIP, "the dataset names no data paths", ""
    bad = [f"{p['key']} {p['url']}: {p['why']}" for p in paths if p["readable"] is False]
    skipped = [f"{p['key']} {p['url']}: {p['why']}" for p in paths if p["readable"] is None]
    if bad:
        return _fail(
            "; ".join(bad),
            "fix the path in the dataset file, or get read access to it (and grant the "
            "worker's account: terraform's data buckets)",
        )
    if skipped and len(skipped) == len(paths):
        return Verdict.SKIP, "; ".join(skipped), ""
    read = f"{len(paths) - len(skipped)} path(s) readable"
    return _ok(read + "".join(f"; {s}" for s in skipped))


# --- The list ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """A check as the runner schedules it: `cheap` ones run in `pipeline start`'s preflight,
    `local` ones apply to the local stack (the others are skipped there)."""

    id: str
    title: str
    evaluate: Callable[[Facts, Deployment], Outcome]
    cheap: bool = False
    local: bool = False

    def result(self, facts: Facts, dep: Deployment) -> CheckResult:
        verdict, detail, fix = self.evaluate(facts, dep)
        return CheckResult(self.id, self.title, verdict, detail, fix)

    def skipped(self, why: str) -> CheckResult:
        return CheckResult(self.id, self.title, Verdict.SKIP, why)

    def unreachable(self, why: str, fix: str = CLOUD_UNREACHABLE_FIX) -> CheckResult:
        """No answer: `fix` is the cloud's (credentials) unless the caller knows better (the
        local stack's: LOCAL_UNREACHABLE_FIX)."""
        return CheckResult(self.id, self.title, Verdict.UNREACHABLE, why, fix)


CHECKS: tuple[Check, ...] = (
    Check("apis", "APIs enabled", check_apis),
    Check("firestore", "Firestore database", check_firestore, cheap=True, local=True),
    Check("pubsub", "Topics, subscriptions, dead letters", check_pubsub, cheap=True, local=True),
    Check("log-sink", "Job-event log sink", check_log_sink),
    Check("scheduler", "Scheduler heartbeat", check_scheduler),
    Check("functions", "Controller functions", check_functions),
    Check("bigtable-instance", "Bigtable instance", check_bigtable_instance, cheap=True),
    Check("graph-table", "Graph table and stage tables", check_graph_table, cheap=True, local=True),
    Check("service-accounts", "Service accounts", check_service_accounts),
    Check("grants", "Accounts' grants", check_grants),
    Check("operator", "Your permissions", check_operator_permissions, cheap=True),
    Check("workload-identity", "Workload Identity binding", check_workload_identity),
    Check("cluster", "Cluster (DNS endpoint)", check_cluster, cheap=True),
    Check("namespace", "Namespace", check_namespace),
    Check("rbac", "Kubernetes verbs", check_rbac),
    Check("images", "Images resolvable", check_images),
    Check("spot-quota", "Spot vCPU quota", check_spot_quota, cheap=True),
    Check("data-paths", "Dataset paths readable", check_data_paths, cheap=True, local=True),
)
CHECK_IDS: tuple[str, ...] = tuple(c.id for c in CHECKS)


def select(ids: list[str] | None = None, cheap_only: bool = False) -> list[Check]:
    """The checks to run: all, the cheap subset, or those named (ValueError for an unknown)."""
    unknown = sorted(set(ids or ()) - set(CHECK_IDS))
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; expected {', '.join(CHECK_IDS)}")
    return [c for c in CHECKS if (not ids or c.id in ids) and (c.cheap or not cheap_only)]
