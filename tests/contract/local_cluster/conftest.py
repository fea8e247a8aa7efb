"""Fixtures of the local cluster's contract tests: clusters started on a temporary folder,
with GKE's event recorder model but no sink delay (these tests read what was published)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from adapters.local.cluster.events import EventSettings
from adapters.local.cluster.local_cluster import LocalCluster


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., tuple[LocalCluster, list]]]:
    made: list[LocalCluster] = []

    def make(**kwargs: Any) -> tuple[LocalCluster, list[dict[str, Any]]]:
        published: list[dict[str, Any]] = []
        kwargs.setdefault("on_event", published.append)
        # GKE's recorder model, but no sink delay: these tests read what was published.
        kwargs.setdefault("events", EventSettings(sink_delay_s=(0.0, 0.0)))
        cluster = LocalCluster(tmp_path / f"cluster{len(made)}", **kwargs).start()
        made.append(cluster)
        return cluster, published

    yield make
    for cluster in made:
        cluster.stop()


@pytest.fixture
def cluster(make_cluster) -> tuple[LocalCluster, list[dict[str, Any]]]:
    return make_cluster()
