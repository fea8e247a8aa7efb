"""The CLI's one wiring entry (`adapters.wiring.cli_services`): the cluster it reads and the
Secret it writes come from the bundle's own members, so a command's seams are the bundle's."""

from __future__ import annotations

import dataclasses
import json

import pytest

from adapters import wiring
from scripts import cluster_access


class Recorder:
    """A cluster factory of the bundle: records how it was asked, returns a marker."""

    def __init__(self, name: str) -> None:
        self.name, self.calls = name, []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return self.name


def _services() -> tuple[wiring.CliServices, Recorder, Recorder]:
    reader, writer = Recorder("reader"), Recorder("writer")
    return (
        dataclasses.replace(wiring.cli_services(), cluster_reader=reader, secret_writer=writer),
        reader,
        writer,
    )


def test_a_local_stack_is_read_and_written_by_its_kubeconfig(tmp_path):
    (tmp_path / "stack.json").write_text(json.dumps({"namespace": "ns", "kubeconfig": "kc"}))
    services, reader, writer = _services()
    assert cluster_access.read_cluster(stack_dir=tmp_path, services=services) == "reader"
    assert cluster_access.secret_writer(stack_dir=tmp_path, services=services) == "writer"
    assert reader.calls == writer.calls == [(("ns", "kc"), {})]


def test_gke_is_read_and_written_from_the_environment_with_the_namespace(tmp_path):
    services, reader, writer = _services()
    got = cluster_access.secret_writer("pipeline", stack_dir=tmp_path, env={}, services=services)
    assert got == "writer" and reader.calls == []
    assert writer.calls == [((), {"env": {cluster_access.NAMESPACE_ENV: "pipeline"}})]


def test_a_missing_kubernetes_client_names_the_extra(tmp_path):
    def no_client(*args, **kwargs):
        raise ImportError("No module named 'kubernetes'")

    services = dataclasses.replace(wiring.cli_services(), secret_writer=no_client)
    with pytest.raises(cluster_access.ClusterAccessError, match=r"cave-pipeline\[controller\]"):
        cluster_access.secret_writer(stack_dir=tmp_path, env={}, services=services)


def test_every_member_of_the_bundle_is_set():
    services = wiring.cli_services()
    assert all(callable(getattr(services, f.name)) for f in dataclasses.fields(services))
