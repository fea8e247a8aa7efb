"""The local stack: Google's emulators, the local cluster, Eventarc and Scheduler stand-ins.

Everything the cloud deployment has, on this machine: Pub/Sub, Firestore and Bigtable
emulators on free 127.0.0.1 ports; topics and subscriptions as terraform creates them; a
`LocalCluster` whose Job events go to `job-events` like the GKE log sink's; a dispatcher that
delivers `job-events`, `ticks` and `kick` to the functions in `functions/main.py`; and a
ticker. `LocalStack` is a context manager; leaving it stops everything it started.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters import wiring
from adapters.google.pubsub_bus import TOPICS, PubSubBus
from adapters.local.bigtable_meter import BigtableMeter, LocalBigtableMonitor
from adapters.local.chaos import ClusterApiGate
from adapters.local.cluster.events import EventSettings
from adapters.local.cluster.local_cluster import LocalCluster
from adapters.local.emulators import EmulatorSet
from adapters.local.eventarc import Dispatcher
from adapters.local.scheduler import Ticker

log = logging.getLogger("cave_pipeline.local_stack")

# subscription -> (topic, function target in functions/main.py)
ROUTES = {
    "job-events-fn": ("job-events", "on_job_event"),
    "ticks-fn": ("ticks", "on_tick"),
    "kick-fn": ("kick", "on_kick"),
}


SINK_DELAY_ENV = "PIPELINE_LOCAL_SINK_DELAY_S"


def event_settings_from_env() -> EventSettings:
    """The realistic event model; only the sink delay may be set (`PIPELINE_LOCAL_SINK_DELAY_S`)."""
    text = os.environ.get(SINK_DELAY_ENV, "").strip()
    try:
        return EventSettings.with_delay(text) if text else EventSettings()
    except ValueError as e:
        raise ValueError(f"{SINK_DELAY_ENV}: {e}") from None


DEMO_SINK_DELAY = "0-1"


def demo_event_settings() -> EventSettings:
    """For the demo: Kubernetes' recorder limits as always, but a log sink delay of 0 to 1 s
    (a demo of seconds cannot wait a minute for each event) unless `PIPELINE_LOCAL_SINK_DELAY_S`
    asks for another. Layers of more than 25 pods still lose their `Completed` event."""
    return EventSettings.with_delay(os.environ.get(SINK_DELAY_ENV, "").strip() or DEMO_SINK_DELAY)


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
        events: EventSettings | None = None,
    ) -> None:
        """`job_events=False` leaves the job-events topic without a function (as if the log
        sink were missing): the controller then advances on ticks alone. `events`: how Job
        events travel; by default GKE's (recorder limits, sink delay 5-60 s), the delay taken
        from `PIPELINE_LOCAL_SINK_DELAY_S` ("LOW-HIGH" or one number of seconds) if set."""
        self.project, self.tick_period_s = project, tick_period_s
        self.routes = {s: r for s, r in ROUTES.items() if job_events or r[1] != "on_job_event"}
        self._tmp = None if state_dir else tempfile.TemporaryDirectory(prefix="cave-local-")
        self.state_dir = Path(state_dir or self._tmp.name)  # type: ignore[union-attr]
        self.capacity = (capacity_cpu, capacity_memory_gib)
        self.events = events or event_settings_from_env()
        self.emulators = EmulatorSet()
        self.env: dict[str, str] = {}
        self._saved_env: dict[str, str | None] = {}
        self.bus: PubSubBus | None = None
        self.cluster: LocalCluster | None = None
        # what the controller calls: the cluster, behind a gate chaos can close
        self.api: ClusterApiGate | None = None
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
            self.bus.ensure_subscription(topic, sub)
        self.cluster = LocalCluster(
            self.state_dir / "cluster",
            on_event=self._publish_job_event,
            extra_env=self.env,
            capacity_cpu=self.capacity[0],
            capacity_memory_gib=self.capacity[1],
            project=self.project,
            events=self.events,
        )
        self.cluster.start()
        self.api = ClusterApiGate(self.cluster)
        # The in-process functions talk to this cluster, and read the emulator's load from the
        # meter, until stop().
        self._wiring.enter_context(
            wiring.in_process_functions(
                self.api,  # type: ignore[arg-type]  # a Cluster by delegation
                bigtable_monitor=LocalBigtableMonitor(self.bigtable_meter),
            )
        )
        self.dispatcher = Dispatcher(self.project, self.routes).start()
        self.ticker = Ticker(self.tick, self.tick_period_s).start()
        self._write_env_file()
        return self

    def _publish_job_event(self, entry: dict[str, Any]) -> None:
        assert self.bus is not None
        self.bus.publish("job-events", json.dumps(entry).encode())

    def tick(self) -> None:
        """Publish one heartbeat now (the ticker does this every period)."""
        assert self.bus is not None
        self.bus.publish_json("ticks", {"at": datetime.now(UTC).isoformat()})

    def _write_env_file(self) -> None:
        """`pipeline local env` and other terminals read the addresses from here."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        cluster_dir = str((self.state_dir / "cluster").resolve())
        doc = {"env": self.env, "cluster_dir": cluster_dir, "pid": os.getpid()}
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
        if self.cluster is not None:
            self._wiring.close()
            self.cluster.stop()
            self.cluster = self.api = None
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
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
