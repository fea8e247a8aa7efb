"""The GKE cluster adapter against a fake API server (the real `kubernetes` client, its HTTP
answered by `tests.builders.gke_api`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from adapters.gke.cluster import GkeCluster
from tests.builders.gke_api import FakeServer, fake_gke


@pytest.fixture(autouse=True)
def _ca_files_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """from_gke writes the CA to a temp file: keep those in the test's own folder."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


@pytest.fixture
def gke(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> GkeCluster:
    return fake_gke(server, monkeypatch)
