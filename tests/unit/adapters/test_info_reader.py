"""gs:// info files through google-auth, with a stub transport (no network): the URL, the
size, and every failure naming what happened (the config loader adds `data_source.size`)."""

from __future__ import annotations

import json

import pytest
import requests
from google.auth.credentials import AnonymousCredentials
from google.auth.transport.requests import AuthorizedSession

from adapters.google.info_reader import info_url, read_gs_info
from shared.config.precomputed_info import GridUnreadable, size_from_info

INFO = {"scales": [{"size": [16384, 8192, 4096]}, {"size": [8192, 4096, 4096]}]}


class StubTransport(requests.adapters.BaseAdapter):
    """Answers every request with one status and body, and records the URLs asked for."""

    def __init__(self, status: int = 200, body: bytes = b"", error: Exception | None = None):
        super().__init__()
        self.status, self.body, self.error, self.urls = status, body, error, []

    def send(self, request, **kwargs):
        self.urls.append(request.url)
        if self.error is not None:
            raise self.error
        response = requests.Response()
        response.status_code, response._content, response.url = self.status, self.body, request.url
        return response

    def close(self):
        pass


def session(transport: StubTransport) -> AuthorizedSession:
    s = AuthorizedSession(AnonymousCredentials())
    s.mount("https://", transport)
    return s


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("gs://bkt/a/ws", "https://storage.googleapis.com/bkt/a/ws/info"),
        ("precomputed://gs://bkt/ws/", "https://storage.googleapis.com/bkt/ws/info"),
        ("gs://bkt", "https://storage.googleapis.com/bkt/info"),
    ],
)
def test_info_url(url, want):
    assert info_url(url) == want


def test_the_info_is_read_through_the_authorized_session():
    transport = StubTransport(200, json.dumps(INFO).encode())
    info = read_gs_info("gs://bkt/a/ws", session(transport))
    assert size_from_info(info) == (16384, 8192, 4096)
    assert transport.urls == ["https://storage.googleapis.com/bkt/a/ws/info"]


@pytest.mark.parametrize(
    ("transport", "match"),
    [
        (StubTransport(403), r"access denied \(HTTP 403\)"),
        (StubTransport(404), r"not found \(HTTP 404\)"),
        (StubTransport(500), r"HTTP 500"),
        (StubTransport(200, b"<html>"), "is not JSON"),
        (StubTransport(200, b"[1]"), "not a JSON object"),
        (StubTransport(error=requests.ConnectionError("no route")), "unreachable.*no route"),
    ],
)
def test_failures_say_what_happened(transport, match):
    with pytest.raises(GridUnreadable, match=match):
        read_gs_info("gs://bkt/ws", session(transport))


def test_a_gs_watershed_that_cannot_be_read_names_data_source_size(tmp_path, monkeypatch):
    """The config loader's message, through the real dispatch (stubbed: a 403)."""
    from adapters.google import info_reader
    from shared.config.config import ConfigError
    from shared.config.config_files import load_config

    monkeypatch.setattr(info_reader, "default_session", lambda: session(StubTransport(403)))
    (tmp_path / "dataset.yml").write_text(
        "data_source: {WATERSHED: gs://bkt/ws}\ngraph_config: {CHUNK_SIZE: [64, 64, 64]}\n"
    )
    (tmp_path / "pipeline.yml").write_text(
        "graph_id: g\ndataset: dataset.yml\nbigtable: {project: p, instance: i}\n"
    )
    with pytest.raises(ConfigError, match=r"HTTP 403.*set data_source\.size"):
        load_config(tmp_path / "pipeline.yml")
    ok = StubTransport(200, json.dumps(INFO).encode())
    monkeypatch.setattr(info_reader, "default_session", lambda: session(ok))
    assert load_config(tmp_path / "pipeline.yml").layer2_shape() == (256, 128, 64)


@pytest.mark.parametrize(
    ("transport", "code", "said"),
    [
        (StubTransport(error=requests.ConnectionError("no route")), 3, "unreachable: Connection"),
        (StubTransport(error=requests.Timeout("slow")), 3, "unreachable: Timeout"),
        (StubTransport(403), 2, "access denied (HTTP 403)"),
    ],
    ids=["no-network", "timeout", "denied"],
)
def test_an_unreachable_watershed_exits_3_and_a_refusal_2(
    tmp_path, monkeypatch, transport, code, said
):
    """docs/cli.md#exit-codes: a service that did not answer is 3, what the operator must fix
    is 2; both name data_source.size as the way out."""
    from click.testing import CliRunner

    from adapters.google import info_reader
    from scripts.cli import main

    monkeypatch.setattr(info_reader, "default_session", lambda: session(transport))
    (tmp_path / "dataset.yml").write_text(
        "data_source: {WATERSHED: gs://bkt/ws}\ngraph_config: {CHUNK_SIZE: [64, 64, 64]}\n"
    )
    (tmp_path / "pipeline.yml").write_text(
        "graph_id: g\ndataset: dataset.yml\nbigtable: {project: p, instance: i}\n"
    )
    result = CliRunner().invoke(main, ["validate", "-c", str(tmp_path / "pipeline.yml")])
    assert result.exit_code == code, result.output
    assert result.stderr.startswith(f"error: {tmp_path / 'dataset.yml'}: data_source.size")
    assert said in result.stderr and "set data_source.size" in result.stderr
