"""The local stack: Google's emulators, Kubernetes' own control plane with the process
kubelet, the log sink, Eventarc and Scheduler stand-ins.

Everything the cloud deployment has, on this machine: Pub/Sub, Firestore and Bigtable
emulators on free 127.0.0.1 ports; topics and subscriptions as terraform creates them; local
Kubernetes (`adapters.local.kubernetes`: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, RBAC as terraform deploys it, the process kubelet), which the controller
reaches through the GKE adapter as its own service account; the log sink, which writes the
API server's Job Events to `job-events` as GKE's exporter does; a dispatcher that delivers
`job-events`, `ticks` and `kick` to the functions in `functions/main.py`; and a ticker.
`LocalStack` is a context manager; leaving it stops everything it started.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from adapters.google.pubsub_bus import TOPICS, PubSubBus
from adapters.local.bigtable_meter import BigtableMeter, LocalBigtableMonitor
from adapters.local.emulators import EmulatorSet
from adapters.local.eventarc import Dispatcher
from adapters.local.kube_api import KubeApi
from adapters.local.kubernetes import LocalKubernetes, default_nodes
from adapters.local.log_sink import DEFAULT_SINK_DELAY_S, EventLogSink, parse_sink_delay
from adapters.local.pod_usage import KubeletPodUsage
from adapters.local.process_groups import start_ticks
from adapters.local.scheduler import Ticker
from adapters.local.write_gate import WriteGate
from shared.ports.cluster import Cluster

log = logging.getLogger("cave_pipeline.local_stack")

# What hosts the functions in this process on the stack's cluster, with its Bigtable load and
# pods' usage (`adapters.wiring.in_process_functions`): handed in by the wiring, which sits
# above the local stack (`adapters.wiring.local_stack` builds one).
HostFunctions = Callable[..., AbstractContextManager[None]]

# The trigger subscriptions' retry policy as terraform/functions.tf deploys it: a function that
# answers 5xx (an API outage, a crash) gets the message again after 10 s, doubling to 600 s, not
# in a tight loop (a test holds the two to agree).
TRIGGER_RETRY_BACKOFF_S = (10, 600)
# subscription -> (topic, function target in functions/main.py)
ROUTES = {
    "job-events-fn": ("job-events", "on_job_event"),
    "ticks-fn": ("ticks", "on_tick"),
    "kick-fn": ("kick", "on_kick"),
}


SINK_DELAY_ENV = "PIPELINE_LOCAL_SINK_DELAY_S"
# terraform's namespace (variables.tf), which pipeline.yml's `namespace` defaults to as well
DEFAULT_NAMESPACE = "cave-pipeline"
DEMO_SINK_DELAY = "0-1"


def sink_delay_from_env() -> tuple[float, float]:
    """GKE's sink delay (5 to 60 s) unless `PIPELINE_LOCAL_SINK_DELAY_S` asks for another."""
    text = os.environ.get(SINK_DELAY_ENV, "").strip()
    try:
        return parse_sink_delay(text) if text else DEFAULT_SINK_DELAY_S
    except ValueError as e:
        raise ValueError(f"{SINK_DELAY_ENV}: {e}") from None


def demo_sink_delay() -> tuple[float, float]:
    """For the demo: a log sink delay of 0 to 1 s (a demo of seconds cannot wait a minute for
    each event) unless `PIPELINE_LOCAL_SINK_DELAY_S` asks for another. The Job controller's
    recorder limits are Kubernetes' own: layers of more than 25 pods still lose events."""
    return parse_sink_delay(os.environ.get(SINK_DELAY_ENV, "").strip() or DEMO_SINK_DELAY)


class LocalStack:
    """Start with `with LocalStack(...) as stack:`; `stack.env` is what clients need."""

    def __init__(
        self,
        project: str = "local-demo",
        state_dir: Path | None = None,
        tick_period_s: float = 60.0,
        capacity_cpu: float = 4.0,
        capacity_memory_gib: float = 16.0,
        job_events: bool = True,
        sink_delay_s: tuple[float, float] | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        *,
        host_functions: HostFunctions,
    ) -> None:
        """`host_functions`: what makes the functions of this process talk to the stack
        (`adapters.wiring.in_process_functions`). `job_events=False` leaves the job-events
        topic without a function (as if the log sink were missing): the controller then
        advances on ticks alone. `sink_delay_s`: the log sink's delay, (low, high) seconds
        per entry; by default GKE's (5-60 s), or what `PIPELINE_LOCAL_SINK_DELAY_S`
        ("LOW-HIGH" or one number of seconds) says."""
        self.project, self.tick_period_s = project, tick_period_s
        self._host_functions = host_functions
        self.routes = {s: r for s, r in ROUTES.items() if job_events or r[1] != "on_job_event"}
        self._tmp = None if state_dir else tempfile.TemporaryDirectory(prefix="cave-local-")
        self.state_dir = Path(state_dir or self._tmp.name)  # type: ignore[union-attr]
        self.capacity = (capacity_cpu, capacity_memory_gib)
        self.sink_delay_s = sink_delay_s or sink_delay_from_env()
        self.namespace = namespace
        self.emulators = EmulatorSet()
        self.env: dict[str, str] = {}
        self._saved_env: dict[str, str | None] = {}
        self.bus: PubSubBus | None = None
        # Kubernetes (faults through its own mechanisms), and the controller's client of it
        self.kube: LocalKubernetes | None = None
        self.cluster: Any = None  # adapters.gke.cluster.GkeCluster, as the controller
        self.write_gate: WriteGate | None = None  # the functions' cluster (faults hook here)
        self.log_sink: EventLogSink | None = None
        self._wiring = ExitStack()  # the in-process functions' wiring, while running
        self.dispatcher: Dispatcher | None = None
        self.ticker: Ticker | None = None
        # Counts the requests to the Bigtable emulator: the local instance's load.
        self.bigtable_meter: BigtableMeter | None = None

    def __enter__(self) -> LocalStack:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LocalStack:
        self.emulators.start()
        # Every Bigtable client goes through the meter (docs/bigtable-ramp-and-bill.md).
        self.bigtable_meter = BigtableMeter(self.emulators.env["BIGTABLE_EMULATOR_HOST"]).start()
        self.env = {
            **self.emulators.env,
            "BIGTABLE_EMULATOR_HOST": self.bigtable_meter.address,
            "PIPELINE_PROJECT": self.project,
            "GOOGLE_CLOUD_PROJECT": self.project,
            "PIPELINE_CLUSTER": "local",
            # the tick function watches tail layers until shortly before the next tick
            "PIPELINE_TICK_PERIOD_S": str(self.tick_period_s),
        }
        for key, value in self.env.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        self.bus = PubSubBus(self.project)
        for topic in TOPICS:
            self.bus.ensure_topic(topic)
        for sub, (topic, _) in self.routes.items():
            self.bus.ensure_subscription(topic, sub, retry_backoff_s=TRIGGER_RETRY_BACKOFF_S)
        # Kept before it starts: a stop during its start (SIGTERM) stops what it started.
        self.kube = LocalKubernetes(
            self.state_dir / "kubernetes",
            namespace=self.namespace,
            nodes=default_nodes(*self.capacity),
            extra_env=self.env,
        )
        self.kube.start()
        from adapters.gke.cluster import GkeCluster

        self.cluster = GkeCluster.from_kubeconfig(
            namespace=self.namespace, config_file=str(self.kube.controller_kubeconfig)
        )
        self.log_sink = EventLogSink(
            KubeApi.from_kubeconfig(self.kube.admin_kubeconfig),
            self.namespace,
            self._publish_job_event,
            project=self.project,
            sink_delay_s=self.sink_delay_s,
        )
        self.log_sink.start()
        # The in-process functions talk to this cluster, read the emulator's load from the
        # meter and the pods' lifetime usage from the kubelet (Cloud Monitoring's part), until
        # stop().
        assert self.kube.kubelet is not None
        self.write_gate = WriteGate(self.cluster)
        self._wiring.enter_context(
            self._host_functions(
                cast(Cluster, self.write_gate),  # a Cluster by delegation
                bigtable_monitor=LocalBigtableMonitor(self.bigtable_meter),
                pod_usage=KubeletPodUsage(self.kube.kubelet),
            )
        )
        self.dispatcher = Dispatcher(self.project, self.routes).start()
        self.ticker = Ticker(self.tick, self.tick_period_s).start()
        self._write_env_file()
        return self

    def _publish_job_event(self, entry: dict[str, Any]) -> None:
        assert self.bus is not None
        self.bus.publish("job-events", json.dumps(entry).encode())

    def _dump_cluster(self) -> None:
        """Keep the cluster's Jobs and their pods in `<state>/cluster.json` (a kept state dir
        only): the API server's data goes with the stack, and benches replay from it."""
        try:
            jobs = []
            for job in self.cluster.list_jobs({}):
                pods = self.cluster.list_pods(job.name)
                jobs.append({"status": asdict(job), "pods": [asdict(p) for p in pods]})
            text = json.dumps({"jobs": jobs}, default=str, indent=1)
            (self.state_dir / "cluster.json").write_text(text)
        except Exception as e:  # noqa: BLE001 - never in the way of stopping
            log.warning("could not keep the cluster's Jobs: %s", e)

    def tick(self) -> None:
        """Publish one heartbeat now (the ticker does this every period)."""
        assert self.bus is not None
        self.bus.publish_json("ticks", {"at": datetime.now(UTC).isoformat()})

    def _write_env_file(self) -> None:
        """`pipeline local env` and other terminals read the addresses from here."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        assert self.kube is not None
        # `kubectl` in this folder: KUBECONFIG=.local-stack/kubeconfig (the stack's admin).
        kubeconfig = self.state_dir / "kubeconfig"
        kubeconfig.write_text(self.kube.admin_kubeconfig.read_text())
        kubeconfig.chmod(0o600)
        doc = {
            "env": self.env,
            "kubeconfig": str(self.kube.operator_kubeconfig.resolve()),
            "admin_kubeconfig": str(kubeconfig.resolve()),
            "namespace": self.namespace,
            "pid": os.getpid(),
            "pids": self.kube.pids(),
            # What a SIGKILL of this process would leave running (adapters/local/crashed_stack.py)
            "emulator_groups": {
                e.name: {"pgid": e.pid, "started": start_ticks(e.pid)}
                for e in self.emulators.emulators.values()
            },
        }
        (self.state_dir / "stack.json").write_text(json.dumps(doc, indent=2))

    def stop(self) -> None:
        """Stop everything started, in reverse order; safe to call twice."""
        for part in (self.ticker, self.dispatcher):
            if part is not None:
                try:
                    part.stop()
                except Exception as e:  # keep stopping the rest
                    log.warning("stopping %s: %s", type(part).__name__, e)
        self.ticker = self.dispatcher = None
        self._wiring.close()
        if self.cluster is not None and self._tmp is None:
            self._dump_cluster()
        if self.log_sink is not None:
            self.log_sink.stop()
            self.log_sink = None
        if self.kube is not None:
            self.kube.stop()
            self.kube = None
        self.cluster = None
        if self.bus is not None:
            self.bus.close()
            self.bus = None
        if self.bigtable_meter is not None:
            self.bigtable_meter.stop()
            self.bigtable_meter = None
        self.emulators.stop()
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env = {}
        (self.state_dir / "stack.json").unlink(missing_ok=True)
        (self.state_dir / "kubeconfig").unlink(missing_ok=True)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
