"""The process kubelet's `/metrics/resource` body: the series metrics-server reads, with the
labels it finds by name, each sample stamped; the node's figures are its containers' sums.
(metrics-server's own parser reads it in tests/contract/local_cluster/test_metrics_server.py.)"""

from __future__ import annotations

import pytest

from adapters.local.kubelet.resource_metrics import ContainerSample, render

NOW_MS = 1_764_720_000_000
LABELS = '{container="worker",namespace="ns",pod="job-0-abc"}'
A = ContainerSample("ns", "job-0-abc", "worker", 12.5, 300 * 2**20, 1_764_719_990.0)
B = ContainerSample("ns", "job-1-def", "worker", 0.25, 100 * 2**20, 1_764_719_995.5)


def samples(body: bytes) -> dict[str, str]:
    """Series line (name and labels) -> value, the HELP/TYPE comments aside."""
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 2)[0], line.split(" ")
            out[series] = value[-2] if len(value) == 3 else value[-1]
    return out


@pytest.mark.parametrize(
    ("containers", "series", "value"),
    [
        ([A], "container_cpu_usage_seconds_total" + LABELS, "12.5"),
        ([A], "container_memory_working_set_bytes" + LABELS, str(300 * 2**20)),
        ([A], "container_start_time_seconds" + LABELS, "1764719990.0"),
        ([A, B], "node_cpu_usage_seconds_total", "12.75"),
        ([A, B], "node_memory_working_set_bytes", str(400 * 2**20)),
        ([], "node_cpu_usage_seconds_total", "0"),
        ([A], "resource_scrape_error", "0"),
    ],
)
def test_each_series_metrics_server_reads(containers, series, value) -> None:
    assert samples(render(containers, NOW_MS))[series] == value


def test_every_sample_but_the_error_flag_carries_the_scrape_time() -> None:
    lines = [ln for ln in render([A, B], NOW_MS).decode().splitlines() if ln[:1] != "#"]
    stamped = [ln for ln in lines if not ln.startswith("resource_scrape_error")]
    assert len(stamped) == 8 and all(ln.endswith(f" {NOW_MS}") for ln in stamped)


def test_each_series_is_declared_once_with_its_type() -> None:
    body = render([A, B], NOW_MS).decode()
    assert body.count("# TYPE container_cpu_usage_seconds_total counter") == 1
    assert body.count("# TYPE container_memory_working_set_bytes gauge") == 1
    assert body.count("# TYPE node_cpu_usage_seconds_total counter") == 1


def test_label_values_are_escaped() -> None:
    odd = ContainerSample("ns", 'p"q', "c\\d", 1.0, 1, 0.0)
    assert 'pod="p\\"q"' in render([odd], NOW_MS).decode()
    assert 'container="c\\\\d"' in render([odd], NOW_MS).decode()
