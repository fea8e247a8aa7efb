"""The functions' memory (which sets their vCPU) is declared twice, by terraform and by Cloud
Build's redeploy; both must give the size docs/local-cluster.md derives from the decoding
benchmark, or a redeploy would silently resize the controller."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

hcl2 = pytest.importorskip("hcl2", reason="python-hcl2 is in the dev extra")

ROOT = Path(__file__).resolve().parents[3]
SIZE = "2Gi"  # 1 vCPU: a 100,000-pod layer's reads fit in the one-minute tick


def test_terraform_and_cloud_build_deploy_the_functions_at_the_documented_size() -> None:
    with open(ROOT / "terraform" / "functions.tf", encoding="utf-8") as f:
        tf = hcl2.load(f)
    # python-hcl2 keeps some versions' quotes around names and strings.
    fns = [
        next(iter(r.values()))
        for r in tf["resource"]
        if next(iter(r)).strip('"') == "google_cloudfunctions2_function"
    ]
    assert len(fns) == 1, "one google_cloudfunctions2_function resource (the for_each)"
    fn = next(iter(fns[0].values()))
    (service,) = fn["service_config"]
    assert service["available_memory"].strip('"') == SIZE
    build = (ROOT / "cloudbuild.yaml").read_text(encoding="utf-8")
    assert re.findall(r"--memory=(\S+)", build) == [SIZE]
    assert f"`{SIZE}`" in (ROOT / "docs" / "local-cluster.md").read_text(encoding="utf-8")
