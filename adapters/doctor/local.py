"""The facts the local stack has, read through the clients the CLI itself uses: its Firestore
and Pub/Sub emulators and the graph's and the stages' tables in its Bigtable emulator. The
other checks are skipped there."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from adapters.common.emulator_probe import EMULATOR_VARS, probe
from adapters.common.rest import ServiceUnreachable
from adapters.doctor.cloud import empty_input_facts, local_path_facts, table_meta_facts
from shared.config.config import PipelineConfig
from shared.doctor import needs
from shared.doctor.deployment import Deployment

Facts = dict[str, Any]


def is_local(env: Mapping[str, str]) -> bool:
    """Whether the environment points the clients at emulators (a local stack's, or tests')."""
    return any(env.get(v) for v in EMULATOR_VARS)


class LocalFacts:
    """Fetches the local checks' facts from the emulators named in `env`."""

    def __init__(
        self,
        cfg: PipelineConfig,
        dep: Deployment,
        env: Mapping[str, str],
        topics: tuple[str, ...] = (),
        subscriptions: tuple[str, ...] = (),
    ) -> None:
        self.cfg, self.dep, self.env = cfg, dep, env
        self.topics, self.subscriptions = topics, subscriptions

    def fetchers(self) -> dict[str, Callable[[], Facts]]:
        return {
            "firestore": self.firestore,
            "pubsub": self.pubsub,
            "graph-table": self.graph_table,
            "data-paths": self.data_paths,
        }

    def _host(self, var: str) -> str:
        """The emulator's address, once it accepts a connection (ServiceUnreachable within
        seconds otherwise, rather than the client's minutes of silent retries)."""
        host = self.env.get(var)
        if not host:
            raise ServiceUnreachable(
                f"{var} is not set: start the local stack (`pipeline local up`)"
            )
        why = probe(host)
        if why is not None:
            raise ServiceUnreachable(f"nothing answers at {host} ({var}): {why}")
        return host

    def firestore(self) -> Facts:
        """The run store's own query (`pipeline start` makes it next), through its client."""
        from adapters.google.firestore_store import FirestoreRunStore

        host = self._host("FIRESTORE_EMULATOR_HOST")
        try:
            FirestoreRunStore(self.dep.project).runs_of_graph(self.cfg.graph_id)
        except Exception as e:  # noqa: BLE001 - the emulator did not answer
            raise ServiceUnreachable(f"Firestore emulator at {host}: {e}") from None
        return {"local": True, "address": host}

    def pubsub(self) -> Facts:
        """The topics and subscriptions, through the Pub/Sub clients the CLI publishes with."""
        from google.api_core import exceptions as gexc

        from adapters.google.pubsub_bus import PubSubBus

        self._host("PUBSUB_EMULATOR_HOST")
        bus = PubSubBus(self.dep.project)

        def get(read: Callable[[], Any]) -> Any:
            try:
                return read()
            except gexc.NotFound:
                return None
            except gexc.GoogleAPICallError as e:
                raise ServiceUnreachable(f"Pub/Sub emulator: {e}") from None

        try:
            return {
                "local": True,
                "topics": {
                    t: get(lambda t=t: bus.publisher.get_topic(topic=bus.topic_path(t)))
                    for t in self.topics
                },
                "subscriptions": {
                    s: get(
                        lambda s=s: bus.subscriber.get_subscription(
                            subscription=bus.subscription_path(s)
                        )
                    )
                    for s in self.subscriptions
                },
            }
        finally:
            bus.close()

    def graph_table(self) -> Facts:
        if not self.env.get("BIGTABLE_EMULATOR_HOST"):
            return {"skip": "no Bigtable emulator named (BIGTABLE_EMULATOR_HOST)"}
        self._host("BIGTABLE_EMULATOR_HOST")
        names = [table for _, table in self.dep.stage_tables]
        return {**bigtable_table_facts(self.cfg), "stage_tables": tables_exist(self.cfg, names)}

    def data_paths(self) -> Facts:
        paths = []
        for path in needs.data_paths(self.cfg):
            if path.url.removeprefix("precomputed://").startswith("gs://"):
                why = "local stack: gs:// not read"
                paths.append({"key": path.key, "url": path.url, "readable": None, "why": why})
            else:
                paths.append({"key": path.key, "url": path.url, **local_path_facts(self.cfg, path)})
        return {"paths": paths, **empty_input_facts(self.cfg)}


def bigtable_table_facts(cfg: PipelineConfig) -> Facts:
    """The graph table's state through the Bigtable clients (emulator or service): absent, or
    present with the metadata its cell holds."""
    from datetime import timedelta

    from adapters.bigtable.client import close_bigtable_client, open_bigtable_client

    if not tables_exist(cfg, [cfg.graph_id])[cfg.graph_id]:
        return {"exists": False}
    client = open_bigtable_client(
        cfg.graph_id, cfg.bigtable.project, cfg.bigtable.instance, timedelta(minutes=1)
    )
    try:
        return table_meta_facts(cfg, client.read_table_meta())
    finally:
        close_bigtable_client(client)


def tables_exist(cfg: PipelineConfig, names: list[str]) -> dict[str, bool]:
    """Whether each table is in the config's Bigtable instance (emulator or service)."""
    from google.cloud import bigtable

    admin = bigtable.Client(project=cfg.bigtable.project, admin=True)
    try:
        instance = admin.instance(cfg.bigtable.instance)
        return {name: instance.table(name).exists() for name in names}
    except Exception as e:  # noqa: BLE001 - the emulator or service did not answer
        raise ServiceUnreachable(f"Bigtable: {type(e).__name__}: {str(e)[:160]}") from None
    finally:
        admin.close()
