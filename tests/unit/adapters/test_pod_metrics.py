"""Per-pod usage: /proc parsing (table-driven on sample text), the sampling arithmetic on a
fake /proc tree, pid discovery by log file, and PodMetrics parsing."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from adapters.gke.metrics import parse_pod_metrics
from adapters.local.kubelet.proc_usage import (
    LifeUsage,
    parse_stat_cpu_ticks,
    parse_status_rss_bytes,
    read_proc,
)
from shared.ports.cluster import PodUsage

# utime is field 14, stime field 15 (here 1000 and 250).
STAT = "4242 (python3) S 1 4242 4242 0 -1 4194560 900 0 0 0 1000 250 7 3 20 0 1 0 5 1 2"


@pytest.mark.parametrize(
    ("text", "ticks"),
    [
        (STAT, 1250),
        (STAT.replace("(python3)", "(my worker)"), 1250),  # a space in the command name
        (STAT.replace("(python3)", "(a) b (c))"), 1250),  # parentheses in the command name
        ("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 0 0 0 0 20 0 1 0 1 1 1\n", 0),
    ],
)
def test_stat_cpu_ticks(text, ticks):
    assert parse_stat_cpu_ticks(text) == ticks


@pytest.mark.parametrize("text", ["", "garbage", "12 (x) S 1 2 3", "12 x S " + "1 " * 20])
def test_stat_rejects_what_is_not_a_stat_line(text):
    with pytest.raises(ValueError):
        parse_stat_cpu_ticks(text)


@pytest.mark.parametrize(
    ("text", "rss"),
    [
        ("Name:\tpython3\nVmPeak:\t  20000 kB\nVmRSS:\t   12345 kB\nThreads:\t1\n", 12345 * 1024),
        ("Name:\tkthreadd\nState:\tS (sleeping)\nThreads:\t1\n", None),  # kernel thread
        ("VmRSS:\t2 mB\n", 2 * 1024**2),
        ("VmRSS:\t0 kB\n", 0),
    ],
)
def test_status_rss(text, rss):
    assert parse_status_rss_bytes(text) == rss


@pytest.mark.parametrize("text", ["VmRSS:\n", "VmRSS:\t12 parsecs\n", "VmRSS:\tlots kB\n"])
def test_status_rejects_malformed_rss(text):
    with pytest.raises(ValueError):
        parse_status_rss_bytes(text)


def _fake_proc(root: Path, pid: int, ticks: tuple[int, int], rss_kb: int | None) -> None:
    d = root / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    fields = ["S", "1", "1", "1", "0", "-1", "0", "0", "0", "0", "0", str(ticks[0]), str(ticks[1])]
    (d / "stat").write_text(f"{pid} (w) " + " ".join(fields + ["0"] * 8) + "\n")
    status = "Name:\tw\n" + (f"VmRSS:\t{rss_kb} kB\n" if rss_kb is not None else "")
    (d / "status").write_text(status)


def test_read_proc_of_a_missing_process_is_none(tmp_path):
    assert read_proc(99999, tmp_path) is None


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_real_process_is_measured_over_its_life():
    """The kubelet's sampling of a running container: its peak memory (a 64 MiB block it
    holds) and its CPU (a busy loop) once it has ended."""
    busy = (
        "import time\nblock = bytearray(64 * 1024 * 1024)\nt = time.time()\n"
        "while time.time() - t < 1.0: pass\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", busy])
    usage = LifeUsage(every_s=0.0)
    try:
        while proc.poll() is None:
            usage.sample(proc.pid)
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    assert usage.peak_memory_gib() is not None and usage.peak_memory_gib() > 60 / 1024
    assert usage.cpu_used(1.0) is not None and usage.cpu_used(1.0) > 0


@pytest.mark.parametrize(
    ("containers", "cpu", "mem_gib"),
    [
        ([{"name": "worker", "usage": {"cpu": "250m", "memory": "512Mi"}}], 0.25, 0.5),
        ([{"name": "worker", "usage": {"cpu": "1500000000n", "memory": "1Gi"}}], 1.5, 1.0),
        (
            [
                {"name": "worker", "usage": {"cpu": "100m", "memory": "1048576Ki"}},
                {"name": "sidecar", "usage": {"cpu": "50000u", "memory": "0"}},
            ],
            0.15,
            1.0,
        ),
        ([], 0.0, 0.0),
    ],
)
def test_pod_metrics_items(containers, cpu, mem_gib):
    items = [{"metadata": {"name": "p-0-abc"}, "containers": containers}]
    usage = parse_pod_metrics(items)["p-0-abc"]
    assert usage == PodUsage(pytest.approx(cpu), pytest.approx(mem_gib))
