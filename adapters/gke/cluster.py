"""`shared.ports.cluster.Cluster` on a real Kubernetes API server (GKE) through the `kubernetes`
client.

Thin: every call goes through `_call`, which turns client, transport and auth failures into
the interface's three errors (`connection.translate`, `wire.api_error`); objects
are mapped from their wire form by the pure `adapters.gke.wire`. Reads (a Job, and the
paged Job, pod and event lists) take the response body as plain JSON (`_preload_content=False`,
then `json.loads`): the client stays the transport (auth, TLS, retries, errors), but its model
classes, which cost about 40 times the CPU of the JSON itself (docs/local-cluster.md, "Decoding
at scale"), are never built. Cloud Functions build it
with `from_env()` from the cluster's DNS endpoint that terraform passes in, and authenticate
as the function's service account through google-auth (`GoogleTokenHook`); operators use
their kubeconfig.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import google.auth
import google.auth.exceptions
import kubernetes
from kubernetes.client import ApiClient, ApiException, BatchV1Api, Configuration, CoreV1Api

from adapters.gke.connection import (
    ENV_CA,
    GoogleTokenHook,
    api_host,
    ca_for,
    is_dns_endpoint,
    translate,
)
from adapters.gke.metrics import gke_pod_usage
from adapters.gke.wire import (
    JOB_NAME_LABELS,
    UNFINISHED_PODS,
    event_time,
    job_status,
    label_selector,
    pod_info,
    releasable,
    sort_events,
    suspension_pending,
    sweep_selector,
)
from shared.model.job_generation import controller_uid, events_of_generation, pod_selector
from shared.ports.cluster import (
    ClusterError,
    ClusterUnreachableError,
    JobStatus,
    PodInfo,
    PodUsage,
    ResizeOutcome,
)

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
NODE_EVENTS_NAMESPACE = "default"  # where events about Nodes are recorded
# node-problem-detector's kernel monitor (shared.reconcile.node_oom reads the events)
NODE_OOM_REASON = "OOMKilling"
PAGE = 500  # list page size: a big layer's Job keeps many thousands of finished pods
ENV_ENDPOINT = "PIPELINE_GKE_ENDPOINT"
ENV_NAMESPACE, ENV_CONTEXT = "PIPELINE_NAMESPACE", "PIPELINE_KUBE_CONTEXT"
log = logging.getLogger("cave_pipeline.gke")
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"  # the client would pick json-patch for a dict
_EPOCH = datetime.min.replace(tzinfo=UTC)
# How long a drain waits for the Job controller to mark a suspension (it does within a second
# or so): a Job controller that is down or far behind must not hold a pause for long.
SUSPENSION_WAIT_S, SUSPENSION_POLL_S = 10.0, 0.2


class GkeCluster:
    """Indexed Jobs on a Kubernetes API server, in one namespace."""

    def __init__(
        self,
        api_client: ApiClient,
        namespace: str,
        *,
        request_timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api_client, self.namespace = api_client, namespace
        self._sleep = sleep
        self.batch, self.core = BatchV1Api(api_client), CoreV1Api(api_client)
        self.request_timeout = request_timeout
        self._opts = {"_request_timeout": request_timeout}  # every call has a deadline
        self.endpoint = api_client.configuration.host

    # -- constructors --------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls, context: str | None = None, namespace: str = "default", config_file: str | None = None
    ) -> GkeCluster:
        """From a kubeconfig (KUBECONFIG or ~/.kube/config), e.g. `gcloud container clusters
        get-credentials`; its auth plugin refreshes the token."""
        try:
            api = kubernetes.config.new_client_from_config(config_file=config_file, context=context)
        except (kubernetes.config.ConfigException, OSError) as e:
            where = config_file or os.environ.get("KUBECONFIG") or "~/.kube/config"
            raise ClusterError(
                f"cannot load kubeconfig {where}{f' context {context!r}' if context else ''}: {e}; "
                "run `gcloud container clusters get-credentials` or set KUBECONFIG"
            ) from e
        return cls(api, namespace)

    @classmethod
    def from_gke(
        cls,
        endpoint: str,
        ca_cert_b64: str = "",
        namespace: str = "default",
        credentials: Any = None,
        *,
        request_timeout: float = 30.0,
        retries: int = 2,
    ) -> GkeCluster:
        """From a GKE endpoint - its DNS endpoint (verified against the public CAs), or an IP
        with the cluster's CA - authenticated as the process's Google identity (Application
        Default Credentials unless `credentials` is given)."""
        ca_file = ca_for(endpoint, ca_cert_b64)  # a config error before any credentials
        if credentials is None:
            try:
                credentials, _ = google.auth.default(scopes=SCOPES)
            except google.auth.exceptions.DefaultCredentialsError as e:
                raise ClusterError(
                    f"no Google credentials to reach GKE: {e}; run `gcloud auth "
                    "application-default login` locally, or give the function a service account"
                ) from e
        config = Configuration()
        config.host = api_host(endpoint)
        config.ssl_ca_cert = ca_file
        config.verify_ssl = True
        # Connection errors are retried by urllib3 (safe: nothing reached the server); the
        # caller's next trigger retries everything else.
        config.retries = retries
        config.api_key["authorization"] = ""  # placeholder: makes the client ask the hook
        config.refresh_api_key_hook = GoogleTokenHook(credentials)
        return cls(ApiClient(config), namespace, request_timeout=request_timeout)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GkeCluster:
        """`PIPELINE_GKE_ENDPOINT` - the DNS endpoint, or an IP with `PIPELINE_GKE_CA` -
        (Cloud Functions) or `KUBECONFIG` / `PIPELINE_KUBE_CONTEXT` (operators); namespace
        `PIPELINE_NAMESPACE`."""
        env = os.environ if env is None else env
        namespace = env.get(ENV_NAMESPACE) or "default"
        endpoint, ca = env.get(ENV_ENDPOINT), env.get(ENV_CA)
        if endpoint or ca:
            if not endpoint:
                raise ClusterError(f"{ENV_ENDPOINT} is not set (needed with {ENV_CA})")
            if not ca and not is_dns_endpoint(endpoint):
                raise ClusterError(
                    f"{ENV_CA} is not set (needed with the IP endpoint {ENV_ENDPOINT}="
                    f"{endpoint}; the DNS endpoint, gke-<id>.<region>.gke.goog, needs none)"
                )
            return cls.from_gke(endpoint, ca or "", namespace)
        if env.get("KUBECONFIG") or env.get(ENV_CONTEXT):
            return cls.from_kubeconfig(env.get(ENV_CONTEXT), namespace, env.get("KUBECONFIG"))
        raise ClusterError(
            f"no cluster configured: set {ENV_ENDPOINT} (terraform output cluster_dns_endpoint; "
            f"an IP endpoint needs {ENV_CA} too), or "
            f"KUBECONFIG / {ENV_CONTEXT} to use a kubeconfig; {ENV_NAMESPACE} picks the namespace"
        )

    # -- Cluster protocol ------------------------------------------------------------------

    @contextmanager
    def _call(self, action: str, *, ignore: tuple[int, ...] = ()) -> Iterator[None]:
        """Translate what the block raises; HTTP statuses in `ignore` end the block quietly."""
        try:
            yield
        except Exception as e:
            if isinstance(e, ApiException) and e.status in ignore:
                return
            hook = self.api_client.configuration.refresh_api_key_hook
            if isinstance(e, ApiException) and e.status == 401 and hasattr(hook, "invalidate"):
                hook.invalidate()
            error = translate(e, action, self.endpoint)
            if error is None:
                raise
            raise error from e

    def create_job(self, manifest: dict[str, Any]) -> bool:
        name = (manifest.get("metadata") or {}).get("name", "?")
        created = False
        with self._call(f"create job {name} in namespace {self.namespace}", ignore=(409,)):
            self.batch.create_namespaced_job(self.namespace, manifest, **self._opts)
            created = True
        return created

    def apply_config_map(self, manifest: dict[str, Any]) -> None:
        """Create or replace a ConfigMap (a run's dataset file)."""
        self._apply(
            manifest,
            self.core.create_namespaced_config_map,
            self.core.replace_namespaced_config_map,
        )

    def apply_secret(self, manifest: dict[str, Any]) -> None:
        """Create or replace a Secret (`pipeline setup`'s credential files)."""
        self._apply(
            manifest, self.core.create_namespaced_secret, self.core.replace_namespaced_secret
        )

    def _apply(self, manifest: dict[str, Any], create: Any, replace: Any) -> None:
        name = (manifest.get("metadata") or {}).get("name", "?")
        what = f"{manifest.get('kind', 'object')} {name} in namespace {self.namespace}"
        with self._call(f"create {what}", ignore=(409,)):
            create(self.namespace, manifest, **self._opts)
            return
        # 409 (suppressed above): it exists already; replace its content.
        with self._call(f"replace {what}"):
            replace(name, self.namespace, manifest, **self._opts)

    def validate_job(self, manifest: dict[str, Any]) -> None:
        name = (manifest.get("metadata") or {}).get("name", "?")
        # A server-side dry run runs validation and admission (Autopilot's included) and
        # persists nothing; 409 only says the Job exists already, which is fine.
        with self._call(f"validate job {name} in namespace {self.namespace}", ignore=(409,)):
            self.batch.create_namespaced_job(self.namespace, manifest, dry_run="All", **self._opts)

    def get_job(self, name: str) -> JobStatus | None:
        found = self._read_job(name)
        return None if found is None else job_status(found)

    def _read_job(self, name: str) -> dict[str, Any] | None:
        found = None
        action = f"get job {name}"
        with self._call(action, ignore=(404,)):
            found = self._json(action, self.batch.read_namespaced_job, name, self.namespace)
        return found

    def list_jobs(self, labels: dict[str, str]) -> list[JobStatus]:
        items = self._list(self.batch.list_namespaced_job, "list jobs", label_selector(labels))
        return sorted((job_status(j) for j in items), key=lambda s: (s.created or _EPOCH, s.name))

    def patch_job(
        self, name: str, *, parallelism: int | None = None, suspend: bool | None = None
    ) -> None:
        spec: dict[str, Any] = {}
        if parallelism is not None:
            spec["parallelism"] = int(parallelism)
        if suspend is not None:
            spec["suspend"] = bool(suspend)
        if not spec:
            return
        with self._call(f"patch job {name}"):
            self._patch_spec(name, spec)

    def delete_job(self, name: str, scope: Mapping[str, str] | None = None) -> None:
        job = self.get_job(name)
        if job is None:
            return
        if not job.finished and not job.suspended:
            # Suspend first: once its pods go, an unsuspended Job refills its parallelism
            # before the delete lands, and the replacements schedule and bill. Never a
            # precondition: admission re-validates the whole pod template on any update, so
            # a Job whose compute class is gone refuses its own suspend (400/422).
            with self._call(f"suspend job {name}", ignore=(400, 404, 422)):
                self._patch_spec(name, {"suspend": True})
        self._delete_pods(job, scope, keep_terminal=False)
        with self._call(f"delete job {name}", ignore=(404,)):
            # Background: the Job goes now; its pods were deleted just above, and whatever
            # the sweep missed the garbage collector removes.
            self.batch.delete_namespaced_job(
                name, self.namespace, propagation_policy="Background", **self._opts
            )

    def drain_job(self, name: str, scope: Mapping[str, str] | None = None) -> None:
        found = self._suspension_seen(name)
        job = None if found is None else job_status(found)
        if job is None or job.finished:
            return
        self._delete_pods(job, scope, keep_terminal=True)
        # The Job survives: its condemned pods wait for the Job controller to clear their
        # tracking finalizer, which a suspended Job may never get.
        selector = sweep_selector(pod_selector(job.uid), scope)
        held = self._list(
            self.core.list_namespaced_pod,
            f"list pods of job {name}",
            selector,
            each=lambda pod: (pod.get("metadata") or {}).get("name") if releasable(pod) else None,
        )
        for pod_name in filter(None, held):
            with self._call(f"release pod {pod_name}", ignore=(404,)):
                # A merge patch nulls the whole list: the Job controller's is its only entry.
                self.core.patch_namespaced_pod(
                    pod_name,
                    self.namespace,
                    {"metadata": {"finalizers": None}},
                    _content_type=MERGE_PATCH,
                    **self._opts,
                )

    def _suspension_seen(self, name: str) -> dict[str, Any] | None:
        """The Job (wire form) once the Job controller has marked its suspension: a sync it
        began before it saw the suspension may still create a replacement pod, which a sweep
        made earlier would miss (on a lost node it then stays until the Node goes). Waits at
        most SUSPENSION_WAIT_S, then returns the Job as it is."""
        for _ in range(round(SUSPENSION_WAIT_S / SUSPENSION_POLL_S)):
            found = self._read_job(name)
            if found is None or not suspension_pending(found):
                return found
            self._sleep(SUSPENSION_POLL_S)
        log.warning(
            "job %s: the Job controller has not marked its suspension in %.0f s; "
            "draining its pods anyway (one it is creating now may stay until its grace ends)",
            name,
            SUSPENSION_WAIT_S,
        )
        return self._read_job(name)

    def _delete_pods(
        self, job: JobStatus, scope: Mapping[str, str] | None, *, keep_terminal: bool
    ) -> None:
        """One collection delete of the Job's pods (by its uid, within `scope`), grace 0:
        one request however many pods (the garbage collector reaps one by one, tens of
        minutes for a large layer), and no pod holds its slot through a grace period.
        `keep_terminal` spares Succeeded and Failed pods."""
        kwargs: dict[str, Any] = {
            "label_selector": sweep_selector(pod_selector(job.uid), scope),
            "grace_period_seconds": 0,
            "propagation_policy": "Background",
        }
        if keep_terminal:
            kwargs["field_selector"] = UNFINISHED_PODS
        action = f"delete pods of job {job.name}"
        with self._call(action, ignore=(404,)):
            # The answer lists every pod deleted: read as JSON, never as the client's models.
            self._json(action, self.core.delete_collection_namespaced_pod, self.namespace, **kwargs)

    def _patch_spec(self, name: str, spec: dict[str, Any]) -> None:
        # A JSON merge patch of absolute values: replaying it is harmless.
        self.batch.patch_namespaced_job(
            name, self.namespace, {"spec": spec}, _content_type=MERGE_PATCH, **self._opts
        )

    def list_pods(
        self, job_name: str, index: int | None = None, job_uid: str = ""
    ) -> list[PodInfo]:
        # By the uid of the Job now under the name, not the name: a Job re-created under it
        # must not count, bill or show the previous generation's pods.
        if not job_uid:
            job = self.get_job(job_name)
            if job is None:
                return []
            job_uid = job.uid
        return self._pods_of(job_name, pod_selector(job_uid, index))

    def _pods_of(self, job_name: str, selector: str) -> list[PodInfo]:
        # Mapped page by page: only one page of pod JSON (500 pods, ~3.5 MB) is alive at once.
        pods = self._list(
            self.core.list_namespaced_pod, f"list pods of job {job_name}", selector, each=pod_info
        )
        return sorted(pods, key=lambda p: (p.index, p.created or _EPOCH, p.name))

    def pod_log(self, pod_name: str, tail_lines: int = 100) -> str:
        return self.pod_log_lines(pod_name, tail_lines)

    def delete_pod(self, name: str) -> None:
        with self._call(f"delete pod {name}", ignore=(404,)):
            # No grace override: the pod's own terminationGracePeriodSeconds applies.
            self.core.delete_namespaced_pod(name, self.namespace, **self._opts)

    def resize_pod(
        self, name: str, container: str, resources: dict[str, dict[str, str]]
    ) -> ResizeOutcome:
        body = {"spec": {"containers": [{"name": container, "resources": resources}]}}
        try:
            # Strategic merge: containers merge by name, so only this one's resources change.
            self.core.patch_namespaced_pod_resize(
                name, self.namespace, body, _content_type=STRATEGIC_PATCH, **self._opts
            )
        except ApiException as e:
            if e.status in (404, 422):  # no subresource (before 1.33), or not resizable so
                log.info("pod %s: in-place resize refused (HTTP %s)", name, e.status)
                return ResizeOutcome.UNSUPPORTED
            with self._call(f"resize pod {name}"):
                raise
        except Exception:
            with self._call(f"resize pod {name}"):
                raise
        return ResizeOutcome.RESIZED

    def pod_log_updated(self, pod_name: str) -> datetime | None:
        # The kubelet prefixes each line with its RFC 3339 time when asked (`timestamps`),
        # whatever the image writes: one line is all it takes.
        line = self.pod_log_lines(pod_name, tail_lines=1, timestamps=True)
        return log_line_time(line)

    def pod_log_lines(self, pod_name: str, tail_lines: int, timestamps: bool = False) -> str:
        """The last `tail_lines` of a pod's log, each prefixed with its time if asked."""
        extra = {"timestamps": True} if timestamps else {}
        try:
            with self._call(f"read log of pod {pod_name}"):
                return self.core.read_namespaced_pod_log(
                    pod_name, self.namespace, tail_lines=tail_lines, **extra, **self._opts
                )
        except ClusterError as e:
            # 400 "container ... is waiting to start": no log yet, as a Pending pod has none.
            if getattr(e.__cause__, "status", None) == 400 and "waiting" in str(e):
                return ""
            raise

    def job_events(self, job_name: str) -> list[dict[str, Any]]:
        selector = f"involvedObject.kind=Job,involvedObject.name={job_name}"
        items = self._list(
            self.core.list_namespaced_event, f"list events of job {job_name}", field=selector
        )
        return sort_events(items)

    def pod_events(self, job_name: str) -> list[dict[str, Any]]:
        # Events of pods `<job>-<index>-<suffix>` (Kubernetes keeps them about an hour); the
        # API cannot select by name prefix, so every pod event of the namespace is paged.
        job = self.get_job(job_name)
        if job is None:
            return []
        mine = re.compile(rf"^{re.escape(job_name)}-\d+-[a-z0-9]+$")
        items = self._list(
            self.core.list_namespaced_event,
            f"list pod events of job {job_name}",
            field="involvedObject.kind=Pod",
        )
        named = [e for e in items if mine.match((e.get("involvedObject") or {}).get("name", ""))]
        # Pods of the name that an earlier Job created (orphans still listed), and the events
        # from before this Job existed, are another generation's.
        others = frozenset(
            p.uid
            for p in self._pods_of(job_name, f"{JOB_NAME_LABELS[0]}={job_name}")
            if controller_uid(p.labels) != job.uid
        )
        return sort_events(events_of_generation(named, others, job.created, event_time))

    def node_oom_events(self) -> list[dict[str, Any]]:
        # Events about cluster-scoped objects (a Node) are recorded in `default`, whatever
        # namespace the pods run in.
        items = self._list(
            self.core.list_namespaced_event,
            "list the nodes' OOMKilling events in namespace default",
            field=f"involvedObject.kind=Node,reason={NODE_OOM_REASON}",
            namespace=NODE_EVENTS_NAMESPACE,
        )
        return sort_events(items)

    def pod_usage(self, job_name: str) -> dict[str, PodUsage]:
        job = self.get_job(job_name)
        if job is None:
            return {}
        return gke_pod_usage(
            self.api_client, self.namespace, job_name, self.request_timeout, job_uid=job.uid
        )

    # -- helpers ---------------------------------------------------------------------------

    def _json(self, action: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a read method and return its answer as plain JSON (the wire form the mapping
        expects), without the client's model classes. Non-2xx answers still raise the
        client's ApiException (the caller's `_call` translates it)."""
        response = method(*args, _preload_content=False, **kwargs, **self._opts)
        try:
            body = response.data
        finally:
            response.release_conn()
        try:
            return json.loads(body)
        except (TypeError, ValueError) as e:  # cut short, or a proxy's HTML page
            raise ClusterUnreachableError(
                f"{action}: the API server at {self.endpoint} answered {len(body or b'')} "
                f"bytes that are not JSON ({e}); retry, and check any proxy in the path"
            ) from e

    def _list(
        self,
        method: Callable[..., Any],
        action: str,
        labels: str = "",
        *,
        field: str = "",
        each: Callable[[dict[str, Any]], Any] = lambda item: item,
        namespace: str = "",
    ) -> list[Any]:
        """Every item of a paged list call: `each(item)` of its wire-form dict, applied as
        each page arrives (so a page's JSON can go before the next is read)."""
        items: list[Any] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": PAGE}
            if labels:
                kwargs["label_selector"] = labels
            if field:
                kwargs["field_selector"] = field
            if token:
                kwargs["_continue"] = token
            with self._call(action):
                page = self._json(action, method, namespace or self.namespace, **kwargs)
            items.extend(each(item) for item in page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items


_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)\s")


def log_line_time(text: str) -> datetime | None:
    """The time of the last line of a log read with `timestamps=True` (RFC 3339 with up to
    nanoseconds, e.g. `2026-12-01T19:52:07.123456789Z msg`); None for an empty log."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return None
    m = _LOG_TIME.match(lines[-1] + " ")
    if m is None:
        raise ClusterError(f"log line without a timestamp: {lines[-1][:80]!r}")
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    micros = (m.group(2) or "0")[:6].ljust(6, "0")
    return datetime.fromisoformat(f"{m.group(1)}.{micros}{zone}").astimezone(UTC)
