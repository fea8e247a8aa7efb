"""The control plane's readiness probe of the API server: a serving certificate the API
server is still writing (an empty or partial file) is "not ready yet", not an error that
fails the stack's start (it did, under load: ssl.SSLError NO_CERTIFICATE_OR_CRL_FOUND)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.local.controlplane.control_plane import ControlPlane


@pytest.mark.parametrize(
    "content",
    ["", "-----BEGIN CERTIFICATE-----\nMIIC", "not a certificate"],
    ids=["empty", "half written", "garbage"],
)
def test_a_certificate_being_written_is_not_ready(tmp_path: Path, content: str) -> None:
    cp = ControlPlane(tmp_path, tmp_path / "kube", server="https://127.0.0.1:1")
    cp.ca_file.parent.mkdir(parents=True)
    cp.ca_file.write_text(content)
    assert cp._api_ok("/readyz", "token") is False


def test_no_certificate_yet_is_not_ready(tmp_path: Path) -> None:
    cp = ControlPlane(tmp_path, tmp_path / "kube", server="https://127.0.0.1:1")
    assert cp._api_ok("/readyz", "token") is False
