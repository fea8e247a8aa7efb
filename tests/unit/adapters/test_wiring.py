"""The composition root: the functions' controller, and the in-process cluster the local
stack (and the functions' tests) wire it to for as long as they run."""

from __future__ import annotations

import pytest

from adapters import wiring
from tests.builders.fakes import RecordingCluster


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The clients connect lazily: no service is reached by building the controller.
    monkeypatch.setenv("PIPELINE_PROJECT", "p-wiring")
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:9")
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:9")
    monkeypatch.setenv("PIPELINE_CLUSTER", "local")


def test_in_process_functions_wire_the_controller_then_restore(env: None) -> None:
    with pytest.raises(wiring.WiringError, match="no cluster is registered"):
        wiring.controller()
    outer, inner = RecordingCluster(), RecordingCluster()
    with wiring.in_process_functions(outer, done_markers=None):
        ctrl = wiring.controller()
        assert ctrl.cluster is outer and wiring.controller() is ctrl  # built once
        with wiring.in_process_functions(inner):
            assert wiring.controller().cluster is inner
        assert wiring.controller().cluster is outer
    with pytest.raises(wiring.WiringError, match="no cluster is registered"):
        wiring.controller()


def test_the_project_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIPELINE_PROJECT", raising=False)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    with pytest.raises(wiring.WiringError, match="PIPELINE_PROJECT"):
        wiring.project_from_env()
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p2")
    assert wiring.project_from_env() == "p2"
