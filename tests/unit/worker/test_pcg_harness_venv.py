"""tests.builders.pcg_harness: where the predecessor's harness cannot be had, the reason is
named (the contract test skips with it); pip's offline errors are told from broken ones."""

from __future__ import annotations

import sys

import pytest

from tests.builders import pcg_harness
from tests.builders.pcg_harness import WINDOW, HarnessUnavailable, harness_python


def test_no_python_312_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("PCG_HARNESS_VENV_ROOT", raising=False)
    monkeypatch.setattr(pcg_harness, "find_python312", lambda: None)
    with pytest.raises(HarnessUnavailable, match="no Python 3.12 interpreter"):
        harness_python(tmp_path)


@pytest.mark.parametrize(
    ("stderr", "offline"),
    [
        ("ERROR: No matching distribution found for cave-pipeline==0.0.4", True),
        ("Failed to establish a new connection: [Errno 101] Network is unreachable", True),
        ("ERROR: ResolutionImpossible: conflicting dependencies", False),
    ],
)
def test_offline_pip_is_a_skip_reason_and_a_broken_one_an_error(stderr, offline):
    argv = [sys.executable, "-c", f"import sys; sys.stderr.write({stderr!r}); sys.exit(1)"]
    with pytest.raises(HarnessUnavailable if offline else RuntimeError) as err:
        pcg_harness._run(argv, 60)
    assert isinstance(err.value, HarnessUnavailable) is offline


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        ("NOTE:cave_pipeline.distribution.harness:layer 3 batch 1: 4 chunks", (3, 1, 4)),
        ("NOTE:cave_pipeline.distribution.harness:layer 3 batch 1: 0 chunks", (3, 1, 0)),
        ("NOTE:cave_pipeline.distribution.harness:layer 3 batch 1 done: 4 ok, 0 transient", None),
    ],
)
def test_window_line(line, parsed):
    m = WINDOW.search(line)
    assert (tuple(map(int, m.groups())) if m else None) == parsed
