"""`pipeline demo --workdir DIR` refuses a folder holding an earlier demo's state, before
anything starts, and keeps that state: mixed with a new run's, an earlier run's ledger
records and pods would be audited as this run's."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from scripts.cli import main

DEMO = str(Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml")


@pytest.mark.parametrize("left", ["stack", "chaos", "baseline"])
def test_a_workdir_with_an_earlier_demo_is_refused_and_kept(tmp_path: Path, left: str):
    (tmp_path / left).mkdir()
    (tmp_path / left / "records.jsonl").write_text("{}\n")
    out = CliRunner().invoke(main, ["demo", "-c", DEMO, "--workdir", str(tmp_path)])
    assert out.exit_code == 2, out.output
    assert f"holds an earlier demo's state ({left})" in out.output
    assert "choose an empty folder" in out.output
    assert (tmp_path / left / "records.jsonl").read_text() == "{}\n"  # nothing removed
