"""Shared pytest fixtures."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from adapters.local.emulators import (
    EmulatorMissingError,
    EmulatorSet,
    check_emulators,
    wipe_firestore,
)

# --------------------------------------------------------------------------------------------
# Emulators (gcloud SDK): one set per session; fresh table / project ids per test.
# Tests using these fixtures get the `emulator` marker automatically (`-m "not emulator"`).
# --------------------------------------------------------------------------------------------

EMULATOR_FIXTURES = {
    "emulators",
    "bigtable_table",
    "bigtable_client",
    "firestore_project",
    "pubsub_project",
}
#: JSON of the emulators' client env vars: use those emulators instead of starting a set.
REUSE_EMULATORS_ENV = "PCG_TEST_EMULATOR_ENV"
BIGTABLE_PROJECT = "emulator-project"
JOB_BACKOFF_ENV = "CAVE_TEST_JOB_POD_FAILURE_BACKOFF_SECONDS"  # main.go of the control plane
TEST_JOB_BACKOFF_S = 1.0
BIGTABLE_INSTANCE = "emulator-instance"


def pytest_configure(config: pytest.Config) -> None:
    # Every control plane the suite starts (the fixtures', the local stacks', the demos'
    # subprocesses) gets the suite's one shortened Kubernetes timing (docs/testing.md).
    os.environ.setdefault(JOB_BACKOFF_ENV, str(TEST_JOB_BACKOFF_S))
    # printed by every Bigtable client built against the emulator
    config.addinivalue_line(
        "filterwarnings", "ignore:Connecting to Bigtable emulator:RuntimeWarning"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if EMULATOR_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.emulator)


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def need_emulators() -> None:
    """Skips the tests that use it when the gcloud SDK emulator binaries are missing."""
    try:
        check_emulators()
    except EmulatorMissingError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def emulators(need_emulators: None) -> Iterator[EmulatorSet]:
    """Pub/Sub, Firestore and Bigtable emulators for the session, with the client env vars
    (PUBSUB_EMULATOR_HOST, ...) set in os.environ. Skips if the binaries are missing."""
    reuse = os.environ.get(REUSE_EMULATORS_ENV)
    if reuse:  # emulators started once by scripts/mutation_check.sh for many short sessions
        with pytest.MonkeyPatch.context() as mp:
            env = json.loads(reuse)
            for key, value in env.items():
                mp.setenv(key, value)
            yield SimpleNamespace(env=env)  # type: ignore[misc]
        return
    with EmulatorSet() as emus, pytest.MonkeyPatch.context() as mp:
        for key, value in emus.env.items():
            mp.setenv(key, value)
        yield emus


@pytest.fixture
def bigtable_client(emulators: EmulatorSet) -> Iterator[Callable[..., Any]]:
    """Factory ``(table_id, lock_expiry=30 s, create=False) -> kvdbclient client`` on the
    Bigtable emulator; clients are closed after the test."""
    from adapters.bigtable.chunk_ledger import close_bigtable_client, open_bigtable_client

    clients = []

    def open_client(
        table_id: str, lock_expiry: timedelta = timedelta(seconds=30), create: bool = False
    ) -> Any:
        client = open_bigtable_client(
            table_id, BIGTABLE_PROJECT, BIGTABLE_INSTANCE, lock_expiry, create=create
        )
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        close_bigtable_client(client)


@pytest.fixture
def bigtable_table(bigtable_client: Callable[..., Any]) -> tuple[Any, str]:
    """``(client, table_id)``: a fresh table with kvdbclient's column families."""
    table_id = _unique("test")
    return bigtable_client(table_id, create=True), table_id


@pytest.fixture
def firestore_project(emulators: EmulatorSet) -> Iterator[str]:
    """A fresh Firestore project id, wiped after the test."""
    project = _unique("test")
    yield project
    wipe_firestore(emulators.env["FIRESTORE_EMULATOR_HOST"], project)


@pytest.fixture
def pubsub_project(emulators: EmulatorSet) -> str:
    """A fresh Pub/Sub project id (the emulator cannot be reset, so topics never collide)."""
    return _unique("test")


# --------------------------------------------------------------------------------------------
# Kubernetes' own control plane with the process kubelet: one per session (per xdist worker).
# Tests using it get the `kubernetes` marker; without the built binary they are skipped naming
# the fix (scripts/setup.sh builds it), never silently.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def local_kubernetes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the process kubelet
    (three Nodes), with terraform's RBAC applied in namespace `default`."""
    from adapters.local.controlplane.build import BuildError, binary_path
    from adapters.local.kubernetes import LocalKubernetes

    try:
        binary = binary_path()
    except BuildError as exc:
        pytest.skip(str(exc))
    if not binary.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"the control plane is not built ({binary}): scripts/setup.sh builds it")
        pytest.skip(f"the control plane is not built ({binary}): run scripts/setup.sh")
    # The one shortened Kubernetes timing of the suite, through its named test setting: the Job
    # controller's pod-failure back-off (10 s doubling upstream) is 1 s doubling here, so a
    # retried index costs a second (tests/contract/local_cluster checks it is applied).
    env = {JOB_BACKOFF_ENV: str(TEST_JOB_BACKOFF_S)}  # explicit, whatever the environment
    with LocalKubernetes(tmp_path_factory.mktemp("kubernetes"), control_plane_env=env) as kube:
        yield kube


@pytest.fixture
def kube_cluster(local_kubernetes: Any) -> Iterator[Any]:
    """The GKE adapter on the session's local Kubernetes as the controller, with its faults
    and the Job events published by a log sink without delay (tests.builders.kube_cluster)."""
    from tests.builders.kube_cluster import open_kube_cluster

    cluster = open_kube_cluster(local_kubernetes)
    try:
        yield cluster
    finally:
        cluster.close()
