"""`pipeline rates update` against a local HTTP server answering the Cloud Billing Catalog's
`services.skus.list` pages (tests/fixtures/cloudbilling/, hand-written in the published shape,
validated in tests/unit/money/test_rate_catalog.py): every page read through nextPageToken,
the rows refreshed and the source recorded; a SKU missing or an unreachable API leave the old
table, with a clear error (docs/operating.md#the-rate-table)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from click.testing import CliRunner

from scripts.cli import main
from shared.money.pricing import parse_rates
from tests.builders.serving import serving

ROOT = Path(__file__).parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "cloudbilling"
PAGES = {
    "": json.loads((FIXTURES / "skus_page1.json").read_text()),
    "page-2-token": json.loads((FIXTURES / "skus_page2.json").read_text()),
}


class Catalog(ThreadingHTTPServer):
    """A stand-in for cloudbilling.googleapis.com written by hand: it answers the fixture
    pages by `pageToken`, minus SKUs named in `dropped`, and records each request."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[str] = []
        self.dropped: set[str] = set()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: Catalog

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.server.requests.append(self.path)
        url = urlparse(self.path)
        token = parse_qs(url.query).get("pageToken", [""])[0]
        if url.path != "/v1/services/CCD8-9BF1-090E/skus" or token not in PAGES:
            self.send_response(404)
            body = {"error": {"code": 404, "message": "not found"}}
        else:
            page = dict(PAGES[token])
            page["skus"] = [s for s in page["skus"] if s["description"] not in self.server.dropped]
            self.send_response(200)
            body = page
        data = json.dumps(body).encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def catalog() -> Iterator[Catalog]:
    with serving(Catalog()) as server:
        yield server


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    for name in ("autopilot-rates.csv", "autopilot-rates.source.json"):
        shutil.copy(ROOT / "shared" / "data" / name, tmp_path / "data" / name)
    return tmp_path


def _update(folder: Path, endpoint: str, *regions: str):  # noqa: ANN202 - click's Result
    args = ["rates", "update", "--folder", str(folder), "--endpoint", endpoint, "--api-key", "k3y"]
    for r in regions:
        args += ["--region", r]
    return CliRunner().invoke(main, args)


def _table(folder: Path) -> str:
    return (folder / "data" / "autopilot-rates.csv").read_text()


def test_update_reads_every_page_and_refreshes_the_regions_rows(catalog, folder):
    before = {(r.region, r.compute_class): r for r in parse_rates(_table(folder))}
    result = _update(folder, catalog.root, "us-east1")
    assert result.exit_code == 0, result.output
    tokens = [parse_qs(urlparse(p).query).get("pageToken", [""])[0] for p in catalog.requests]
    assert tokens == ["", "page-2-token"]  # both pages, the second by the first's token
    assert all("key=k3y" in p for p in catalog.requests)
    after = {(r.region, r.compute_class): r for r in parse_rates(_table(folder))}
    assert after[("us-east1", "general-purpose")].cpu_spot == 0.0134  # was 0.0133
    assert after[("us-east1", "Balanced")].mem_spot == 0.0021407
    assert after[("us-east1", "Scale-Out")] == before[("us-east1", "Scale-Out")]  # same prices
    assert after[("asia-east1", "Balanced")] == before[("asia-east1", "Balanced")]  # untouched
    assert set(after) == set(before)
    source = json.loads((folder / "data" / "autopilot-rates.source.json").read_text())
    assert source["refreshed_at"] and "Cloud Billing Catalog API" in source["source"]
    assert source["regions"] == ["us-east1"] and source["skus_read"] == 21
    shown = CliRunner().invoke(main, ["rates", "--folder", str(folder), "--region", "us-east1"])
    assert shown.exit_code == 0
    assert f"refreshed {source['refreshed_at']} from Cloud Billing Catalog API" in shown.output
    assert "us-east1 general-purpose 0.0134 " in shown.output


def test_a_sku_missing_is_an_error_and_the_old_table_stays(catalog, folder):
    old = _table(folder), (folder / "data" / "autopilot-rates.source.json").read_text()
    catalog.dropped = {"Autopilot Balanced Spot Pod Memory Requests (us-east1)"}
    result = _update(folder, catalog.root, "us-east1")
    assert result.exit_code == 1
    assert "no Autopilot pod SKU for us-east1 Balanced: mem_spot" in result.output
    assert "the table is unchanged" in result.output
    assert (_table(folder), (folder / "data" / "autopilot-rates.source.json").read_text()) == old


def test_an_unreachable_api_is_an_error_and_the_old_table_stays(folder):
    old = _table(folder)
    result = _update(folder, "http://127.0.0.1:9/v1", "us-east1")  # port 9: nothing listens
    assert result.exit_code == 3, result.output
    assert "services/CCD8-9BF1-090E/skus (page 1)" in result.output
    assert "k3y" not in result.output  # the key is never printed
    assert _table(folder) == old


def test_a_refused_page_is_an_error_naming_the_page(catalog, folder):
    old = _table(folder)
    second = PAGES.pop("page-2-token")  # the server no longer knows the first page's token
    try:
        result = _update(folder, catalog.root, "us-east1")
    finally:
        PAGES["page-2-token"] = second
    assert result.exit_code == 3
    assert "(page 2): HTTP 404" in result.output
    assert _table(folder) == old


def test_update_without_regions_refreshes_the_configs_region(catalog, folder):
    demo = ROOT / "examples" / "demo" / "pipeline.yml"  # region us-east1
    args = ["rates", "update", "--folder", str(folder), "--endpoint", catalog.root, "-c", str(demo)]
    result = CliRunner().invoke(main, [*args, "--api-key", "k3y"])
    assert result.exit_code == 0, result.output
    assert "3 rows refreshed (2 changed) for us-east1" in result.output
    source = json.loads((folder / "data" / "autopilot-rates.source.json").read_text())
    assert source["regions"] == ["us-east1"]
