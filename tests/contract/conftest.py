"""Fixtures of the contract tests: a stored demo run (store, controller) and a demo volume for
workers run as subprocesses, and the CLI against the emulators (`cli`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner, Result

from adapters.google.firestore_store import FirestoreRunStore
from adapters.google.pubsub_bus import PubSubBus
from demo.oracle import expected_stats
from demo.volume import generate_volume, save_volume
from scripts.cli import main
from shared.config.config_files import load_config
from shared.reconcile.build_plan import new_run
from tests.builders.stored_runs import DEMO, NOW
from tests.builders.worker_runs import CHUNK, N_LAYERS, SIZE, Demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    path = tmp_path_factory.mktemp("demo") / "volume.npy"
    vol = generate_volume(SIZE, seed=3)
    save_volume(path, vol)
    dataset = {
        "data_source": {"size": list(SIZE), "watershed": str(path)},
        "graph_config": {"CHUNK_SIZE": list(CHUNK), "SPATIAL_BITS": 10},
    }
    assert N_LAYERS == 4
    return Demo(vol, dataset, expected_stats(vol, CHUNK, N_LAYERS))


@pytest.fixture
def store(firestore_project: str) -> FirestoreRunStore:
    return FirestoreRunStore(firestore_project)


@pytest.fixture
def run(store: FirestoreRunStore):
    cfg = load_config(DEMO)
    state = new_run(cfg, "r1", ["ingest"], "auto", NOW)
    # These tests drive the layers; the setup pass has its own (test_controller_setup.py).
    state.setups.clear()
    store.create_run(state)
    return state


@pytest.fixture
def cli(firestore_project: str) -> Iterator[Callable[..., Result]]:
    """`pipeline ARGS` in-process against the Firestore emulator, as operator alice (a
    `kick` topic exists for the commands that kick the controller)."""
    bus = PubSubBus(firestore_project)
    bus.ensure_topic("kick")
    runner = CliRunner()
    env = {"PIPELINE_PROJECT": firestore_project, "USER": "alice"}

    def invoke(*args: str) -> Result:
        return runner.invoke(main, list(args), env=env)

    yield invoke
    bus.close()
