"""The local Bigtable meter's request count, table-driven: HEADERS frames counted in a
client's HTTP/2 stream however it is cut into reads; the load from the rate."""

from __future__ import annotations

import pytest

from adapters.local.bigtable_meter import (
    BigtableMeter,
    FrameCounter,
    LocalBigtableMonitor,
    capacity_from_env,
)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(kind: int, payload: bytes = b"", stream: int = 1) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, 0]) + stream.to_bytes(4, "big") + payload


SETTINGS, HEADERS, DATA, WINDOW = 0x4, 0x1, 0x0, 0x8
# A client: preface, settings, then two unary calls (HEADERS + DATA each) and a window update.
STREAM = (
    PREFACE
    + frame(SETTINGS, b"\x00" * 12, 0)
    + frame(HEADERS, b"h" * 40, 1)
    + frame(DATA, b"\x01" * 300, 1)
    + frame(WINDOW, b"\x00" * 4, 0)
    + frame(HEADERS, b"\x01" * 9, 3)  # a payload that looks like a frame header
    + frame(DATA, b"", 3)
)


@pytest.mark.parametrize("piece", [1, 2, 7, 9, 10, 24, 100, len(STREAM)])
def test_headers_frames_are_counted_however_the_stream_is_cut(piece):
    counter = FrameCounter()
    pieces = [STREAM[i : i + piece] for i in range(0, len(STREAM), piece)]
    assert sum(counter.feed(p) for p in pieces) == 2


def test_load_is_the_rate_over_capacity_capped_at_one():
    clock = [100.0]
    meter = BigtableMeter("127.0.0.1:1", clock=lambda: clock[0])
    try:
        monitor = LocalBigtableMonitor(meter, capacity_rps=10.0, window_s=10.0)
        assert monitor.cpu_load("p", "i") == 0.0
        meter.count(50)  # 5 a second over the window: half the capacity
        assert monitor.cpu_load("p", "i") == pytest.approx(0.5)
        meter.count(500)
        assert monitor.cpu_load("p", "i") == 1.0
        clock[0] += 11  # out of the window
        assert monitor.cpu_load("p", "i") == 0.0
    finally:
        meter.stop()


@pytest.mark.parametrize(("text", "want"), [("", 800.0), ("35", 35.0), (" 2.5 ", 2.5)])
def test_capacity_from_env(monkeypatch, text, want):
    monkeypatch.setenv("PIPELINE_LOCAL_BIGTABLE_RPS", text)
    assert capacity_from_env() == want


@pytest.mark.parametrize("text", ["0", "-3", "fast"])
def test_a_bad_capacity_names_the_variable(monkeypatch, text):
    monkeypatch.setenv("PIPELINE_LOCAL_BIGTABLE_RPS", text)
    with pytest.raises(ValueError, match="PIPELINE_LOCAL_BIGTABLE_RPS"):
        capacity_from_env()
