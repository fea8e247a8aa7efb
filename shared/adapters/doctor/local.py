"""The facts the local stack has: its Firestore and Pub/Sub emulators (their REST ports) and
the graph table in its Bigtable emulator. The other checks are skipped there."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shared.adapters.doctor.cloud import local_path_facts, table_meta_facts
from shared.adapters.doctor.rest import RestApi, ServiceUnreachable
from shared.config import PipelineConfig
from shared.doctor import needs
from shared.doctor.deployment import Deployment

Facts = dict[str, Any]

EMULATOR_VARS = ("FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST", "BIGTABLE_EMULATOR_HOST")


def is_local(env: Mapping[str, str]) -> bool:
    """Whether the environment points the clients at emulators (a local stack's, or tests')."""
    return any(env.get(v) for v in EMULATOR_VARS)


def local_session() -> Any:
    """A plain HTTP session for 127.0.0.1 (never through a proxy from the environment)."""
    import requests

    session = requests.Session()
    session.trust_env = False
    return session


class LocalFacts:
    """Fetches the local checks' facts from the emulators named in `env`."""

    def __init__(
        self,
        cfg: PipelineConfig,
        dep: Deployment,
        env: Mapping[str, str],
        api: RestApi,
        topics: tuple[str, ...] = (),
        subscriptions: tuple[str, ...] = (),
    ) -> None:
        self.cfg, self.dep, self.env, self.api = cfg, dep, env, api
        self.topics, self.subscriptions = topics, subscriptions

    def fetchers(self) -> dict[str, Callable[[], Facts]]:
        return {
            "firestore": self.firestore,
            "pubsub": self.pubsub,
            "graph-table": self.graph_table,
            "data-paths": self.data_paths,
        }

    def _host(self, var: str) -> str:
        host = self.env.get(var)
        if not host:
            raise ServiceUnreachable(
                f"{var} is not set: start the local stack (`pipeline local up`)"
            )
        return host

    def firestore(self) -> Facts:
        host = self._host("FIRESTORE_EMULATOR_HOST")
        url = f"http://{host}/v1/projects/{self.dep.project}/databases/(default)/documents/runs"
        reply = self.api.call("GET", f"{url}?pageSize=1")
        if reply.status != 200:
            raise ServiceUnreachable(f"Firestore emulator at {host}: HTTP {reply.status}")
        return {"local": True, "address": host}

    def pubsub(self) -> Facts:
        host = self._host("PUBSUB_EMULATOR_HOST")
        base = f"http://{host}/v1/projects/{self.dep.project}"
        return {
            "local": True,
            "topics": {t: self.api.resource(f"{base}/topics/{t}") for t in self.topics},
            "subscriptions": {
                s: self.api.resource(f"{base}/subscriptions/{s}") for s in self.subscriptions
            },
        }

    def graph_table(self) -> Facts:
        if not self.env.get("BIGTABLE_EMULATOR_HOST"):
            return {"skip": "no Bigtable emulator named (BIGTABLE_EMULATOR_HOST)"}
        return bigtable_table_facts(self.cfg)

    def data_paths(self) -> Facts:
        paths = []
        for path in needs.data_paths(self.cfg):
            if path.url.removeprefix("precomputed://").startswith("gs://"):
                why = "local stack: gs:// not read"
                paths.append({"key": path.key, "url": path.url, "readable": None, "why": why})
            else:
                paths.append({"key": path.key, "url": path.url, **local_path_facts(self.cfg, path)})
        return {"paths": paths}


def bigtable_table_facts(cfg: PipelineConfig) -> Facts:
    """The graph table's state through the Bigtable clients (emulator or service): absent, or
    present with the metadata its cell holds."""
    from datetime import timedelta

    from google.cloud import bigtable

    from shared.adapters.bigtable.client import close_bigtable_client, open_bigtable_client

    admin = bigtable.Client(project=cfg.bigtable.project, admin=True)
    try:
        exists = admin.instance(cfg.bigtable.instance).table(cfg.graph_id).exists()
    except Exception as e:  # noqa: BLE001 - the emulator or service did not answer
        raise ServiceUnreachable(f"Bigtable: {type(e).__name__}: {str(e)[:160]}") from None
    finally:
        admin.close()
    if not exists:
        return {"exists": False}
    client = open_bigtable_client(
        cfg.graph_id, cfg.bigtable.project, cfg.bigtable.instance, timedelta(minutes=1)
    )
    try:
        return table_meta_facts(cfg, client.read_table_meta())
    finally:
        close_bigtable_client(client)
