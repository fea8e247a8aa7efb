"""`pipeline report`'s HTML: self-contained (no fetch), and its charts really draw in a
headless Chromium (Debian's `chromium`; skipped, with the reason, where it is missing)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

pytest.importorskip("plotly", reason="the report needs the `report` extra (plotly)")

from scripts.report_data import build  # noqa: E402
from scripts.views.report import render_html  # noqa: E402
from tests.builders.report_run import report_run  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    run, records, now = report_run()
    data = build(run, records, now)
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(render_html(data), encoding="utf-8")
    return path, data


def test_the_data_has_every_outcome_and_the_failed_index(page):
    _, data = page
    assert {a.outcome for a in data.attempts} == {"succeeded", "failed", "preempted", "oom"}
    assert [(f.layer, f.index, f.chunks, f.attempts) for f in data.failed] == [
        ("ingest-L5", 0, 1, 3)
    ]
    assert max(n for _, n in data.running) >= 2
    assert data.chunks["ingest-L2"][-1][1] == 512  # every chunk of 8^3 done
    assert data.facts["status"] == "failed" and data.facts["failed indexes"] == "1"


def test_the_file_is_self_contained(page):
    text = page[0].read_text()
    assert "Plotly.newPlot" in text and text.count("Plotly.newPlot") == 5
    # No script or stylesheet is fetched: the bundle is inline.
    assert not re.search(r"<script[^>]+src=", text)
    assert not re.search(r"<link[^>]+href=\"http", text)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium: apt-get install -y chromium")
def test_the_charts_draw_in_headless_chromium(page, tmp_path):
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
         "--dump-dom", page[0].as_uri()],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    # Each drawn plot has plotly's SVG layers; the failed index table is there too.
    assert dom.count('class="main-svg"') >= 8  # two per chart
    assert dom.count('class="scatterlayer') >= 3 and 'class="barlayer' in dom
    assert "Pod attempts by layer" in dom and "ingest-L5" in dom
    assert "Where the wall time went" in dom


def test_the_wall_time_chart_sums_to_the_runs_wall_time(page):
    _, data = page
    tl = data.wall_parts
    assert tl is not None and tl.wall_s > 0
    assert sum(tl.parts.values()) == pytest.approx(tl.wall_s)
    assert tl.parts["compute"] > 0 and "ingest-L2" in [lt.key for lt in tl.layers]
