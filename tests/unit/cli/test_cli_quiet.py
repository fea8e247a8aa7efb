"""Library warnings stay off the operator's screen unless -v."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from scripts.cli import main
from scripts.commands import grid
from tests.builders.demo_configs import demo_config_file

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml"


@pytest.fixture
def noisy_config(monkeypatch):
    real = grid.load_config

    def load(path):
        warnings.warn("Connecting to Bigtable emulator at localhost:1", RuntimeWarning, 2)
        return real(path)

    monkeypatch.setattr(grid, "load_config", load)
    yield
    logging.captureWarnings(False)


@pytest.mark.parametrize("verbose", [False, True])
def test_library_warnings_are_logged_and_kept_for_verbose(noisy_config, caplog, verbose, tmp_path):
    args = (["-v"] if verbose else []) + ["validate", "-c", str(demo_config_file(tmp_path))]
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "Connecting to Bigtable emulator" not in result.output  # not printed as a warning
    logged = [r for r in caplog.records if "Connecting to Bigtable" in r.getMessage()]
    assert bool(logged) is verbose  # logged only when -v lets it through
