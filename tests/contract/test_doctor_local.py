"""`pipeline doctor` and `pipeline start`'s preflight against the emulators (the local stack's
Firestore, Pub/Sub and Bigtable): what the local stack has is checked for real, the cloud-only
checks are skipped, and the graph table's three states (absent, without metadata, with
metadata of this grid or another) decide the verdict - a table set up for another grid stops
`pipeline start` unless --no-preflight."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml

from adapters.bigtable.graph_meta_store import write_graph_meta
from adapters.google.firestore_store import FirestoreRunStore
from adapters.google.pubsub_bus import PubSubBus
from shared.config.config_files import load_config
from shared.doctor.checks import CHECKS
from shared.model.graph_meta import GraphMeta
from shared.model.layers import layer_count
from tests.builders.stored_runs import DEMO
from tests.conftest import BIGTABLE_INSTANCE, BIGTABLE_PROJECT


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """The demo config (ingest, l2cache, meshing) on a fresh graph of the Bigtable emulator,
    its watershed a file that exists."""
    raw = yaml.safe_load(DEMO.read_text())
    raw["graph_id"] = f"doc-{uuid.uuid4().hex[:8]}"
    raw["bigtable"] = {"project": BIGTABLE_PROJECT, "instance": BIGTABLE_INSTANCE}
    dataset = yaml.safe_load((DEMO.parent / raw["dataset"]).read_text())
    (tmp_path / "volume.npy").write_bytes(b"")
    dataset["data_source"]["watershed"] = "volume.npy"  # beside the dataset file
    (tmp_path / "dataset.yml").write_text(yaml.safe_dump(dataset))
    raw["dataset"] = "dataset.yml"
    path = tmp_path / "pipeline.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def make_stage_tables(bigtable_client, config: Path) -> None:
    """The passes' tables, as `pipeline setup` makes them."""
    graph = load_config(config).graph_id
    for table in (f"{graph}-l2cache", f"{graph}-meshes"):
        bigtable_client(table, create=True)


def doctor(cli, config: Path) -> tuple[int, dict]:
    result = cli("doctor", "-c", str(config), "--json")
    return result.exit_code, json.loads(result.stdout)


def verdicts(doc: dict) -> dict[str, str]:
    return {c["check"]: c["verdict"] for c in doc["checks"]}


def test_the_local_stack_passes_what_it_has_and_skips_the_cloud(cli, config, bigtable_client):
    make_stage_tables(bigtable_client, config)
    code, doc = doctor(cli, config)
    assert doc["target"] == "local" and code == 0, [
        c for c in doc["checks"] if c["verdict"] != "skip"
    ]
    got = verdicts(doc)
    assert got["firestore"] == got["pubsub"] == got["graph-table"] == "pass"
    assert len(got) == len(CHECKS)
    cloud_only = {"apis", "log-sink", "functions", "cluster", "spot-quota", "images"}
    assert {got[c] for c in cloud_only} == {"skip"}
    table = next(c for c in doc["checks"] if c["check"] == "graph-table")
    assert "absent" in table["detail"]


def test_a_missing_kick_topic_fails_with_its_fix(config, firestore_project):
    from click.testing import CliRunner

    from scripts.cli import main

    # a project whose Pub/Sub has no `kick` topic (the `cli` fixture creates one)
    result = CliRunner().invoke(
        main,
        ["doctor", "-c", str(config), "--check", "pubsub", "--check", "firestore"],
        env={"PIPELINE_PROJECT": firestore_project},
    )
    assert result.exit_code == 1, result.output
    assert "FAIL  Topics, subscriptions, dead letters" in result.output
    assert "missing on the local stack: kick" in result.output
    assert "pipeline local up" in result.output


def test_graph_table_states_and_the_start_preflight(cli, config, bigtable_client):
    cfg = load_config(config)
    make_stage_tables(bigtable_client, config)
    client = bigtable_client(cfg.graph_id, create=True)  # as `pipeline setup` makes it
    _, doc = doctor(cli, config)
    table = next(c for c in doc["checks"] if c["check"] == "graph-table")
    assert table["verdict"] == "pass" and "no graph metadata yet" in table["detail"]

    size, chunk = cfg.ds.data_source.size, cfg.ds.graph_config.CHUNK_SIZE
    layers = layer_count(cfg.layer2_shape())
    write_graph_meta(client, GraphMeta((0, 0, 0), tuple(size), tuple(chunk), layers))
    _, doc = doctor(cli, config)
    table = next(c for c in doc["checks"] if c["check"] == "graph-table")
    assert table["verdict"] == "pass" and "with graph metadata" in table["detail"], table

    half = tuple(s // 2 for s in size)
    write_graph_meta(client, GraphMeta((0, 0, 0), half, tuple(chunk), layers - 1))
    code, doc = doctor(cli, config)
    table = next(c for c in doc["checks"] if c["check"] == "graph-table")
    assert code == 1 and table["verdict"] == "fail" and "deletetable" in table["fix"]

    refused = cli("start", "-c", str(config), "--run-id", "pre1")
    assert refused.exit_code == 2  # the fix is named: docs/cli.md#exit-codes
    assert "error: preflight failed" in refused.stderr
    assert "preflight fail: Graph table" in refused.output and "--no-preflight" in refused.output
    store = FirestoreRunStore(load_config(config).project)  # nothing was stored
    assert [r.run_id for r in store.runs_of_graph(cfg.graph_id)] == []

    forced = cli("start", "-c", str(config), "--run-id", "pre2", "--no-preflight")
    assert forced.exit_code == 0, forced.output


def test_pipeline_setup_makes_the_stage_tables_the_preflight_asks_for(
    config, firestore_project, tmp_path, local_kubernetes
):
    """A by-hand build with the passes: before `pipeline setup` the start is refused naming
    each missing table and the command that makes them; `pipeline setup` makes every one;
    a start of ingest alone needs none of them."""
    from click.testing import CliRunner

    from scripts import cluster_access
    from scripts.cli import main

    env = {  # the pods' Secret goes to local Kubernetes, as the operators write it
        "PIPELINE_PROJECT": firestore_project,
        "KUBECONFIG": str(local_kubernetes.operator_kubeconfig),
        cluster_access.NAMESPACE_ENV: local_kubernetes.namespace,
    }
    bus = PubSubBus(firestore_project)
    bus.ensure_topic("kick")
    bus.close()

    def run(*args: str):
        return CliRunner().invoke(main, list(args), env=env)

    graph = load_config(config).graph_id
    refused = run("start", "-c", str(config), "--run-id", "early")
    assert refused.exit_code == 2, refused.output
    assert "preflight fail: Graph table and stage tables" in refused.output
    assert f"{graph}-l2cache (l2cache)" in refused.output
    assert f"{graph}-meshes (meshing)" in refused.output
    assert "pipeline setup -c" in refused.output
    only_ingest = run("start", "-c", str(config), "--run-id", "i1", "--stages", "ingest")
    assert only_ingest.exit_code == 0, only_ingest.output

    setup = run("setup", "-c", str(config))
    assert setup.exit_code == 0, setup.output
    assert f"table {graph}-l2cache ready" in setup.output
    assert f"table {graph}-meshes ready" in setup.output
    result = run("doctor", "-c", str(config), "--json", "--check", "graph-table")
    [table] = json.loads(result.stdout)["checks"]
    assert table["verdict"] == "pass", table
    assert f"{graph}-l2cache (l2cache)" in table["detail"] and "exist" in table["detail"]


def test_an_empty_watershed_refuses_the_start_and_says_where_to_set_it(
    cli, config, bigtable_client
):
    """examples/demo's dataset as it is (its watershed left to `pipeline demo`): the setup
    pass would fail on it, so the start is refused before the run exists."""
    make_stage_tables(bigtable_client, config)
    dataset = config.parent / "dataset.yml"
    raw = yaml.safe_load(dataset.read_text())
    raw["data_source"]["watershed"] = ""
    dataset.write_text(yaml.safe_dump(raw))
    refused = cli("start", "-c", str(config), "--run-id", "w1")
    assert refused.exit_code == 2, refused.output
    assert "preflight fail: Dataset paths readable: data_source.watershed empty" in refused.output
    assert f"set it in {dataset}" in refused.output and "pipeline demo data DIR" in refused.output
    store = FirestoreRunStore(load_config(config).project)
    assert [r.run_id for r in store.runs_of_graph(load_config(config).graph_id)] == []
