"""CAVE registration against a hand-written stand-in of middle_auth's sticky_auth routes
(tests/builders/middle_auth.py, a local HTTP server): the adapter's request and what it makes of
each answer, and `pipeline start` on the Firestore emulator registering best effort: a failure is
a warning and a `cave_registration_failed` alert in the run's outbox, never a failed start
(docs/setup-passes.md#cave-registration)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
import yaml

from adapters.cave.sticky_auth import StickyAuth
from adapters.google.firestore_store import FirestoreRunStore
from shared.ports.cave_auth import CaveRegistration, CaveUnreachableError
from tests.builders.middle_auth import middle_auth
from tests.builders.stored_runs import DEMO

TOKEN = "admin-t0ken"


def _reg(host: str, dataset: str = "minnie") -> CaveRegistration:
    return CaveRegistration(host, dataset, "pychunkedgraph", "demo")


def test_the_adapter_posts_the_mapping_with_the_bearer_token():
    with middle_auth({"minnie", "fly"}, TOKEN) as server:
        auth = StickyAuth(requests.Session())
        first = auth.register(_reg(server.host), TOKEN)
        assert (first.status, first.text) == (200, '"success"')
        method, path, header = server.requests[0]
        assert (method, header) == ("POST", f"Bearer {TOKEN}")
        assert path == "/sticky_auth/api/v1/service/pychunkedgraph/table/demo/dataset/minnie"
        again = auth.register(_reg(server.host), TOKEN)  # one mapping per (service, table)
        assert (again.status, again.mapped_to) == (422, "minnie")
        other = auth.register(_reg(server.host, "fly"), TOKEN)
        assert (other.status, other.mapped_to) == (422, "minnie")


def test_the_adapter_answers_a_refused_token_and_an_unknown_dataset():
    with middle_auth({"minnie"}, TOKEN) as server:
        auth = StickyAuth(requests.Session())
        assert auth.register(_reg(server.host), "not-admin").status == 403
        unknown = auth.register(_reg(server.host, "nope"), TOKEN)
        assert (unknown.status, unknown.text) == (404, "Dataset does not exist.")
        assert server.mappings == {}


def test_the_adapter_names_a_host_that_does_not_answer():
    with pytest.raises(CaveUnreachableError, match="ConnectionError"):
        StickyAuth(requests.Session(), timeout=2).register(_reg("http://127.0.0.1:9"), TOKEN)


def _config(tmp_path: Path, host: str, token: str | None) -> str:
    """The demo config with `cave_config` at `host` and, unless None, a CAVE secret."""
    doc = yaml.safe_load(DEMO.read_text())
    dataset = yaml.safe_load((DEMO.parent / doc["dataset"]).read_text())
    dataset["cave_config"] = {"host": host, "dataset": "minnie"}
    (tmp_path / "dataset.yml").write_text(yaml.safe_dump(dataset))
    doc["dataset"] = "dataset.yml"
    if token is not None:
        (tmp_path / "cave.json").write_text(json.dumps({"token": token}))
        doc["secret_files"] = {"cave-secret.json": "cave.json"}
    path = tmp_path / "pipeline.yml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _alerts(store: FirestoreRunStore, run_id: str) -> list[dict]:
    return [a.body for a in store.unsent_alerts(run_id)]


def test_start_registers_the_graph(cli, firestore_project, tmp_path):
    with middle_auth({"minnie"}, TOKEN) as server:
        out = cli("start", "-c", _config(tmp_path, server.host, TOKEN), "--run-id", "c1",
                  "--no-preflight")  # fmt: skip
        assert out.exit_code == 0, out.output
        assert "graph demo registered with CAVE dataset minnie" in out.output
        assert server.mappings == {("pychunkedgraph", "demo"): "minnie"}
        assert _alerts(FirestoreRunStore(firestore_project), "c1") == []


@pytest.mark.parametrize(
    ("token", "up", "says"),
    [
        ("not-admin", True, "the CAVE token was refused (HTTP 403"),
        (None, True, "no cave-secret.json in secret_files"),
        (TOKEN, False, "did not answer"),
    ],
)
def test_a_failed_registration_is_a_warning_and_an_alert_never_a_failed_start(
    cli, firestore_project, tmp_path, token, up, says
):
    with middle_auth({"minnie"}, TOKEN) as server:
        host = server.host if up else "http://127.0.0.1:9"
        out = cli("start", "-c", _config(tmp_path, host, token), "--run-id", "c2",
                  "--no-preflight")  # fmt: skip
        assert server.mappings == {}
    assert out.exit_code == 0, out.output
    assert "warning: CAVE registration of demo" in out.stderr and says in out.stderr
    assert "register by hand: curl -X POST" in out.stderr
    store = FirestoreRunStore(firestore_project)
    assert store.load_run("c2").status == "running"  # the build goes on
    (alert,) = _alerts(store, "c2")
    assert alert["kind"] == "cave_registration_failed" and says in alert["reason"]
    assert "/sticky_auth/api/v1/service/pychunkedgraph/table/demo/dataset/minnie" in alert["fix"]
