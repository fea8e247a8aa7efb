"""docs/operating.md's approval with gcloud and curl alone, run as the operator runs it: the
doc's own code blocks, in bash, with the real `gcloud` (its token from a file, as the
emulators accept any), against the Firestore and Pub/Sub emulators. The only change to the
blocks is the Firestore host. The layer ends up approved exactly as `pipeline approve`
leaves it, a reconcile decided before the approval cannot commit over it, and a layer or run
that does not exist is refused with nothing written."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.google.firestore_store import FirestoreRunStore
from adapters.google.pubsub_bus import PubSubBus
from adapters.local.emulators import EmulatorSet, sdk_root
from shared.config.config_files import load_config
from shared.ports.run_store import StaleStateError
from shared.reconcile.build_plan import new_run

REPO = Path(__file__).resolve().parents[2]
OPERATING = REPO / "docs" / "operating.md"
FIRESTORE_API = "https://firestore.googleapis.com/"
DEMO = REPO / "examples" / "demo" / "pipeline.yml"


def doc_block(name: str) -> str:
    """The shell block of docs/operating.md right under `<!-- NAME -->`."""
    found = re.search(rf"<!-- {name} -->\n```sh\n(.*?)```", OPERATING.read_text(), re.S)
    assert found, f"docs/operating.md has no ```sh block under <!-- {name} -->"
    return found.group(1)


def approve_block() -> str:
    """The approval request: Firestore's public endpoint, once (the host the test replaces)."""
    block = doc_block("gcloud-approve")
    assert block.count(FIRESTORE_API) == 1, block
    return block


@pytest.fixture
def shell(emulators: EmulatorSet, tmp_path: Path, firestore_project: str):
    """`shell(block, RUN=..., LAYER=...)`: a doc block in bash as operator alice of the
    emulators' project; returns the finished process (stdout and stderr as text)."""
    token = tmp_path / "token"
    token.write_text("owner")  # the emulators' administrator token
    env = {
        "PATH": f"{sdk_root() / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "USER": "alice",
        "PROJECT": firestore_project,
        "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
        "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token),
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_PUBSUB": f"http://{emulators['pubsub'].address}/",
    }

    def run(block: str, **variables: str) -> subprocess.CompletedProcess[str]:
        local = block.replace(FIRESTORE_API, f"http://{emulators['firestore'].address}/")
        return subprocess.run(
            ["bash", "-c", local],
            env={**env, **variables},
            capture_output=True,
            text=True,
            timeout=120,  # a failure condition only
        )

    return run


@pytest.fixture
def store(firestore_project: str) -> FirestoreRunStore:
    store = FirestoreRunStore(firestore_project)
    for run_id in ("r-gcloud", "r-cli"):
        run = new_run(load_config(DEMO), run_id, ["ingest"], "approve", datetime.now(UTC))
        store.create_run(run)
    return store


def test_the_documented_request_approves_as_pipeline_approve_does(store, shell, cli):
    bus = PubSubBus(store.db.project)
    bus.ensure_topic("kick")
    kicks = bus.ensure_subscription("kick", "kicks-seen")
    before = store.load_run("r-gcloud")  # what a reconcile running now has read

    approved = shell(approve_block(), RUN="r-gcloud", LAYER="ingest-L3")
    assert approved.returncode == 0, approved.stderr
    assert cli("approve", "r-cli", "ingest", "3").exit_code == 0
    kicked = shell(doc_block("gcloud-kick"), RUN="r-gcloud")
    assert kicked.returncode == 0, kicked.stderr

    by_gcloud, by_cli = store.load_run("r-gcloud"), store.load_run("r-cli")
    layer, same = by_gcloud.layers["ingest-L3"], by_cli.layers["ingest-L3"]
    assert layer.approval.granted and layer.approval.by == "alice" and layer.approval.at is not None
    assert {**layer.to_doc(), "approved_at": None} == {**same.to_doc(), "approved_at": None}
    assert by_gcloud.version == by_cli.version == before.version + 1
    others = [ls for ls in by_gcloud.layers.values() if ls.key != "ingest-L3"]
    assert not any(ls.approval.granted for ls in others)
    # A reconcile decided from the state before the approval cannot write over it.
    with pytest.raises(StaleStateError):
        store.commit(before, copy.deepcopy(before))
    assert store.load_run("r-gcloud").layers["ingest-L3"].approval.granted
    # The kick the controller's on_kick reads: {"run_id": ..., "action": ..., "by": ...}.
    pulled = bus.subscriber.pull(subscription=kicks, max_messages=10, timeout=30)
    bodies = [json.loads(m.message.data) for m in pulled.received_messages]
    assert {"run_id": "r-gcloud", "action": "approve", "by": "alice"} in bodies
    bus.close()


@pytest.mark.parametrize(
    ("run_id", "layer"), [("r-gcloud", "ingest-L9"), ("no-such-run", "ingest-L3")]
)
def test_a_layer_or_run_that_does_not_exist_is_refused_and_nothing_written(
    store, shell, run_id, layer
):
    refused = shell(approve_block(), RUN=run_id, LAYER=layer)
    assert refused.returncode != 0 and "NOT_FOUND" in refused.stdout
    run = store.load_run("r-gcloud")
    assert run.version == 0 and not any(ls.approval.granted for ls in run.layers.values())
    assert "no-such-run" not in [r.run_id for r in store.list_runs()]
