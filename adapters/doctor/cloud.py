"""The facts of a Google Cloud project, fetched from each API's REST endpoint (the shapes of
Google's REST reference; tests answer from hand-written fixtures through the injected
session).

One method per check (`fetchers()` maps check ids to them); each returns the facts dict the
check of the same id in shared.doctor.checks judges. The cluster is read once and shared by the
cluster, namespace and rbac checks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode, urlparse

from adapters.common.rest import RestApi, ServiceUnreachable
from shared.config.config import PipelineConfig
from shared.doctor import needs
from shared.doctor.checks import expected_subscriptions
from shared.doctor.deployment import (
    CONTROLLER_NODE_EVENTS_ROLE,
    CONTROLLER_ROLE,
    NODE_EVENTS_NAMESPACE,
    OPERATOR_KICK_PERMISSIONS,
    OPERATOR_PROJECT_PERMISSIONS,
    OPERATOR_ROLE,
    SERVICE_ACCOUNT_ROLES,
    Deployment,
    RoleRule,
)
from shared.doctor.facts import Denied

Facts = dict[str, Any]

SERVICE_USAGE = "https://serviceusage.googleapis.com/v1"
RESOURCE_MANAGER = "https://cloudresourcemanager.googleapis.com/v1"
FIRESTORE = "https://firestore.googleapis.com/v1"
PUBSUB = "https://pubsub.googleapis.com/v1"
LOGGING = "https://logging.googleapis.com/v2"
SCHEDULER = "https://cloudscheduler.googleapis.com/v1"
FUNCTIONS = "https://cloudfunctions.googleapis.com/v2"
BIGTABLE_ADMIN = "https://bigtableadmin.googleapis.com/v2"
IAM = "https://iam.googleapis.com/v1"
CONTAINER = "https://container.googleapis.com/v1"
ARTIFACT_REGISTRY = "https://artifactregistry.googleapis.com/v1"
COMPUTE = "https://compute.googleapis.com/compute/v1"
STORAGE = "https://storage.googleapis.com/storage/v1"
DOCKER_HUB = "https://hub.docker.com/v2/repositories"

# What reading a graph table's metadata cell gives: kvdbclient's value (None when empty).
MetaReader = Callable[[], Any]


def rule_verbs(rules: tuple[RoleRule, ...]) -> list[tuple[str, str, str, str]]:
    """(verb, group, resource, subresource) for every verb the rules grant."""
    out = []
    for rule in rules:
        for resource in rule.resources:
            name, _, sub = resource.partition("/")
            out += [(verb, rule.group, name, sub) for verb in rule.verbs]
    return out


def _label(verb: str, group: str, resource: str, sub: str) -> str:
    thing = f"{resource}/{sub}" if sub else resource
    return f"{verb} {thing}" + (f".{group}" if group else "")


class CloudFacts:
    """Fetches each check's facts for `cfg`'s deployment `dep` through `api` (an authorized
    session) and `public` (a plain session, for public registries: never sent a token)."""

    def __init__(
        self,
        cfg: PipelineConfig,
        dep: Deployment,
        api: RestApi,
        public: RestApi,
        who: str = "you",
        meta_reader: MetaReader | None = None,
        info_session: Any = None,
    ) -> None:
        self.cfg, self.dep, self.api, self.public, self.who = cfg, dep, api, public, who
        self.meta_reader = meta_reader
        self.info_session = info_session if info_session is not None else api.session
        self._lock = threading.Lock()
        self._cluster: Any = None
        self._cluster_read = False

    def fetchers(self) -> dict[str, Callable[[], Facts]]:
        """check id -> the function fetching its facts."""
        return {
            "apis": self.apis,
            "firestore": self.firestore,
            "pubsub": self.pubsub,
            "log-sink": self.log_sink,
            "scheduler": self.scheduler,
            "functions": self.functions,
            "bigtable-instance": self.bigtable_instance,
            "graph-table": self.graph_table,
            "service-accounts": self.service_accounts,
            "grants": self.grants,
            "operator": self.operator,
            "workload-identity": self.workload_identity,
            "cluster": self.cluster,
            "namespace": self.namespace,
            "rbac": self.rbac,
            "images": self.images,
            "spot-quota": self.spot_quota,
            "data-paths": self.data_paths,
        }

    # --- project-level ---------------------------------------------------------------------

    @property
    def _project(self) -> str:
        return f"projects/{self.dep.project}"

    def apis(self) -> Facts:
        names = "&".join(f"names={self._project}/services/{api}" for api in self.dep.apis)
        found = self.api.resource(f"{SERVICE_USAGE}/{self._project}/services:batchGet?{names}")
        if found is None or isinstance(found, Denied):
            return {"states": found if found is not None else {}}
        return {
            "states": {
                s.get("config", {}).get("name") or s["name"].rsplit("/", 1)[-1]: s.get("state")
                for s in found.get("services", [])
            }
        }

    def firestore(self) -> Facts:
        return {"database": self.api.resource(f"{FIRESTORE}/{self._project}/databases/(default)")}

    def _project_number(self) -> str:
        project = self.api.resource(f"{RESOURCE_MANAGER}/{self._project}")
        return project.get("projectNumber", "") if isinstance(project, dict) else ""

    def pubsub(self) -> Facts:
        topics = {
            t: self.api.resource(f"{PUBSUB}/{self.dep.topic_path(t)}") for t in self.dep.topics
        }
        subs = {
            s: self.api.resource(f"{PUBSUB}/{self._project}/subscriptions/{s}")
            for s in expected_subscriptions(self.dep)
        }
        number = self._project_number()
        agent = f"serviceAccount:service-{number}@gcp-sa-pubsub.iam.gserviceaccount.com"
        policy = self.api.resource(f"{PUBSUB}/{self.dep.topic_path('dead-letters')}:getIamPolicy")
        return {
            "topics": topics,
            "subscriptions": subs,
            "pubsub_agent": agent if number else "",
            "dead_letters_policy": policy,
        }

    def log_sink(self) -> Facts:
        return {
            "sink": self.api.resource(f"{LOGGING}/{self._project}/sinks/{self.dep.sink}"),
            "job_events_policy": self.api.resource(
                f"{PUBSUB}/{self.dep.topic_path('job-events')}:getIamPolicy"
            ),
        }

    def scheduler(self) -> Facts:
        where = f"{self._project}/locations/{self.dep.region}"
        return {"job": self.api.resource(f"{SCHEDULER}/{where}/jobs/{self.dep.scheduler_job}")}

    def functions(self) -> Facts:
        where = f"{FUNCTIONS}/{self._project}/locations/{self.dep.region}/functions"
        return {"functions": {fn: self.api.resource(f"{where}/{fn}") for fn in self.dep.functions}}

    # --- Bigtable --------------------------------------------------------------------------

    @property
    def _instance(self) -> str:
        dep = self.dep
        return f"{BIGTABLE_ADMIN}/projects/{dep.bigtable_project}/instances/{dep.bigtable_instance}"

    def bigtable_instance(self) -> Facts:
        return {"instance": self.api.resource(self._instance)}

    def graph_table(self) -> Facts:
        """The graph's table (and its metadata), and whether each stage table exists."""
        stages = {t: self._table_exists(t) for _, t in self.dep.stage_tables}
        found = self._table_exists(self.dep.graph_table)
        if found is not True:
            return {"exists": found, "stage_tables": stages}
        meta = table_meta_facts(self.cfg, self.meta_reader() if self.meta_reader else None)
        return {**meta, "stage_tables": stages}

    def _table_exists(self, table: str) -> bool | Denied:
        answer = self.api.resource(f"{self._instance}/tables/{table}?view=NAME_ONLY")
        return answer if isinstance(answer, Denied) else answer is not None

    # --- accounts and grants ---------------------------------------------------------------

    def _account_url(self, email: str) -> str:
        return f"{IAM}/{self._project}/serviceAccounts/{email}"

    def service_accounts(self) -> Facts:
        return {
            "accounts": {
                role: self.api.resource(self._account_url(self.dep.email(role)))
                for role in SERVICE_ACCOUNT_ROLES
            }
        }

    def grants(self) -> Facts:
        buckets = sorted(
            {
                urlparse(p.url).netloc
                for p in needs.data_paths(self.cfg)
                if p.url.startswith("gs://")
            }
        )
        return {
            "project_policy": self.api.resource(
                f"{RESOURCE_MANAGER}/{self._project}:getIamPolicy",
                "POST",
                {"options": {"requestedPolicyVersion": 3}},
            ),
            "instance_policy": self.api.resource(f"{self._instance}:getIamPolicy", "POST", {}),
            "alerts_policy": self.api.resource(
                f"{PUBSUB}/{self.dep.topic_path('alerts')}:getIamPolicy"
            ),
            "kick_policy": self.api.resource(
                f"{PUBSUB}/{self.dep.topic_path('kick')}:getIamPolicy"
            ),
            "bucket_policies": {b: self.api.resource(f"{STORAGE}/b/{b}/iam") for b in buckets},
        }

    def operator(self) -> Facts:
        def ask(url: str, permissions: tuple[str, ...]) -> Any:
            answer = self.api.resource(url, "POST", {"permissions": list(permissions)})
            if answer is None or isinstance(answer, Denied):
                return answer or Denied(url, "not found")
            return {"asked": list(permissions), "granted": answer.get("permissions", [])}

        return {
            "who": self.who,
            "project": ask(
                f"{RESOURCE_MANAGER}/{self._project}:testIamPermissions",
                OPERATOR_PROJECT_PERMISSIONS,
            ),
            "kick": ask(
                f"{PUBSUB}/{self.dep.topic_path('kick')}:testIamPermissions",
                OPERATOR_KICK_PERMISSIONS,
            ),
        }

    def workload_identity(self) -> Facts:
        url = f"{self._account_url(self.dep.worker_email)}:getIamPolicy"
        return {"worker_policy": self.api.resource(url, "POST", {})}

    # --- the cluster -----------------------------------------------------------------------

    def _read_cluster(self) -> Any:
        with self._lock:
            if not self._cluster_read:
                where = f"{self._project}/locations/{self.dep.region}/clusters/{self.dep.cluster}"
                self._cluster = self.api.resource(f"{CONTAINER}/{where}")
                self._cluster_read = True
            return self._cluster

    def _dns_endpoint(self) -> str:
        cluster = self._read_cluster()
        if not isinstance(cluster, dict) or cluster.get("status") != "RUNNING":
            return ""
        dns = (cluster.get("controlPlaneEndpointsConfig") or {}).get("dnsEndpointConfig") or {}
        return dns.get("endpoint", "") if dns.get("allowExternalTraffic") else ""

    def cluster(self) -> Facts:
        facts: Facts = {"cluster": self._read_cluster()}
        endpoint = self._dns_endpoint()
        if endpoint:
            reply = self.api.call("GET", f"https://{endpoint}/version")
            if reply.status == 200 and isinstance(reply.body, dict):
                facts["reach"] = {"version": reply.body.get("gitVersion", "?")}
            else:
                facts["reach"] = {"error": f"HTTP {reply.status} {reply.body!r:.160}"}
        return facts

    def namespace(self) -> Facts:
        endpoint = self._dns_endpoint()
        if not endpoint:
            return {"namespace": "unreached"}
        return {
            "namespace": self.api.resource(
                f"https://{endpoint}/api/v1/namespaces/{self.dep.namespace}"
            )
        }

    def _review(self, endpoint: str, kind: str, attrs: dict[str, str], user: str = "") -> Any:
        spec: dict[str, Any] = {"resourceAttributes": attrs}
        if user:
            spec["user"] = user
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": spec}
        plural = kind.lower() + "s"
        return self.api.resource(
            f"https://{endpoint}/apis/authorization.k8s.io/v1/{plural}", "POST", body
        )

    def rbac(self) -> Facts:
        endpoint = self._dns_endpoint()
        if not endpoint:
            return {"operator": "unreached"}
        ns = self.dep.namespace

        def attrs(
            verb: str, group: str, resource: str, sub: str, namespace: str = ns
        ) -> dict[str, str]:
            out = {"namespace": namespace, "verb": verb, "group": group, "resource": resource}
            return {**out, "subresource": sub} if sub else out

        operator: dict[str, bool] = {}
        for rule in rule_verbs(OPERATOR_ROLE):
            answer = self._review(endpoint, "SelfSubjectAccessReview", attrs(*rule))
            operator[_label(*rule)] = bool(
                isinstance(answer, dict) and (answer.get("status") or {}).get("allowed")
            )
        controller: Any = {}
        for rule in rule_verbs(CONTROLLER_ROLE):
            answer = self._review(
                endpoint, "SubjectAccessReview", attrs(*rule), self.dep.email("controller")
            )
            if not isinstance(answer, dict):  # operators may not review others: say so
                controller = answer or Denied("subjectaccessreviews", "not found")
                break
            controller[_label(*rule)] = bool((answer.get("status") or {}).get("allowed"))
        if isinstance(controller, dict):
            for rule in rule_verbs(CONTROLLER_NODE_EVENTS_ROLE):
                answer = self._review(
                    endpoint,
                    "SubjectAccessReview",
                    attrs(*rule, namespace=NODE_EVENTS_NAMESPACE),
                    self.dep.email("controller"),
                )
                allowed = isinstance(answer, dict) and (answer.get("status") or {}).get("allowed")
                controller[f"{_label(*rule)} in namespace {NODE_EVENTS_NAMESPACE}"] = bool(allowed)
        return {"operator": operator, "controller": controller}

    # --- images, quota, data ---------------------------------------------------------------

    def images(self) -> Facts:
        return {
            "images": [
                {"stage": stage, "ref": ref, **self._image(ref)}
                for stage, ref in needs.images(self.cfg).items()
            ]
        }

    def _image(self, ref: str) -> dict[str, Any]:
        name, tag = split_image(ref)
        host, _, path = name.partition("/")
        if host.endswith("-docker.pkg.dev"):
            project, repo, package = (path.split("/", 2) + ["", ""])[:3]
            location = host.removesuffix("-docker.pkg.dev")
            base = (
                f"{ARTIFACT_REGISTRY}/projects/{project}/locations/{location}/repositories/"
                f"{repo}/packages/{quote(package, safe='')}"
            )
            url = f"{base}/versions/{tag}" if tag.startswith("sha256:") else f"{base}/tags/{tag}"
            found = self.api.resource(url)
        elif "." not in host and ":" not in host or host == "docker.io":
            repo = path if host == "docker.io" else name
            if "/" not in repo:
                repo = f"library/{repo}"
            if tag.startswith("sha256:"):
                return {"found": None, "why": "a Docker Hub digest is not looked up"}
            found = self.public.resource(f"{DOCKER_HUB}/{repo}/tags/{tag}")
        else:
            return {"found": None, "why": f"registry {host} is not looked up"}
        if isinstance(found, Denied):
            return {"found": False, "why": str(found)}
        return {"found": found is not None, "why": "found" if found is not None else "no such tag"}

    def spot_quota(self) -> Facts:
        planned, need = needs.planned_vcpus(self.cfg)
        region = self.api.resource(f"{COMPUTE}/{self._project}/regions/{self.dep.region}")
        return {"region": region, "need": need, "planned": planned}

    def data_paths(self) -> Facts:
        paths = [self._data_path(p) for p in needs.data_paths(self.cfg)]
        return {"paths": paths, **empty_input_facts(self.cfg)}

    def _data_path(self, path: needs.DataPath) -> dict[str, Any]:
        out: dict[str, Any] = {"key": path.key, "url": path.url}
        url = path.url.removeprefix("precomputed://")
        parts = urlparse(url)
        if parts.scheme != "gs":
            return {**out, **local_path_facts(self.cfg, path)}
        if path.info:
            from adapters.google.info_reader import read_gs_info
            from shared.config.precomputed_info import GridUnreachable, GridUnreadable

            try:
                read_gs_info(url, self.info_session)
            except GridUnreachable as e:
                raise ServiceUnreachable(str(e)) from None
            except GridUnreadable as e:
                return {**out, "readable": False, "why": str(e)}
            return {**out, "readable": True, "why": "info read"}
        prefix = parts.path.strip("/") + "/"
        query = urlencode({"prefix": prefix, "maxResults": 1})
        listing = self.api.resource(f"{STORAGE}/b/{parts.netloc}/o?{query}")
        if isinstance(listing, Denied):
            return {**out, "readable": False, "why": str(listing)}
        if listing is None:
            return {**out, "readable": False, "why": f"no bucket {parts.netloc}"}
        if not listing.get("items"):
            return {**out, "readable": False, "why": "no objects under it"}
        return {**out, "readable": True, "why": "listed"}


def split_image(ref: str) -> tuple[str, str]:
    """(name, tag or `sha256:...` digest) of an image reference; tag `latest` if none."""
    if "@" in ref:
        name, digest = ref.split("@", 1)
        return name, digest
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = ref.rsplit(":", 1)
        return name, tag
    return ref, "latest"


def table_meta_facts(cfg: PipelineConfig, raw: Any) -> Facts:
    """The graph-table facts of an existing table whose metadata cell holds `raw`."""
    from adapters.bigtable.graph_meta_store import KIND
    from shared.model.graph_meta import GraphMeta, GraphMetaError, mismatch
    from shared.model.layers import layer_count

    if raw is None:
        return {"exists": True, "meta": "none", "image_ingest": "ingest" in cfg.commands}
    if not (isinstance(raw, dict) and raw.get("kind") == KIND):
        return {"exists": True, "meta": "other", "meta_detail": f"{type(raw).__name__}, not ours"}
    try:
        meta = GraphMeta.from_dict(raw)
    except GraphMetaError as e:
        return {"exists": True, "meta": "ours", "mismatch": str(e)}
    l2 = cfg.layer2_shape()
    why = mismatch(meta, l2, layer_count(l2, cfg.ds.graph_config.FANOUT))
    detail = f"layer-2 grid {list(meta.layer2_shape)}, {meta.layer_count} layers"
    return {"exists": True, "meta": "ours", "meta_detail": detail, "mismatch": why}


def empty_input_facts(cfg: PipelineConfig) -> Facts:
    """The data-paths facts of the required inputs left empty (shared.doctor.needs)."""
    empty = needs.empty_inputs(cfg)
    return {"empty": empty, "empty_fix": needs.empty_input_fix(cfg)} if empty else {}


def local_path_facts(cfg: PipelineConfig, path: needs.DataPath) -> dict[str, Any]:
    """A non-gs:// data path: a local file or folder (relative to the dataset file) must
    exist; other schemes (s3://, https://, ...) are not read here."""
    from pathlib import Path

    url = path.url.removeprefix("precomputed://")
    scheme = urlparse(url).scheme
    if scheme not in ("", "file"):
        return {"readable": None, "why": f"{scheme}:// is not read here"}
    parts = urlparse(url)  # file://./x parses "." as the host: keep it as a relative path
    local = Path(parts.netloc + parts.path) if scheme == "file" else Path(url)
    if not local.is_absolute() and cfg.source_path:
        local = (Path(cfg.source_path).parent / cfg.dataset).parent / local
    if not local.exists():
        return {"readable": False, "why": f"{local} not found"}
    return {"readable": True, "why": "found"}
