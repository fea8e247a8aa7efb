"""The local stack's Bigtable load: a relay in front of the Bigtable emulator that counts the
requests going through it, and a `BigtableMonitor` that turns their rate into a CPU load.

The emulator keeps no statistics and reports no load, so the stack points every client
(the pods, the controller's ledger and graph-table reads) at this relay instead of the
emulator, and the relay counts gRPC requests: each one opens an HTTP/2 stream with a HEADERS
frame from the client, so counting the client's HEADERS frames counts requests, whatever the
client library (reads, mutations, scans). The load is the rate over the last
`window_s` seconds divided by `capacity_rps` (`PIPELINE_LOCAL_BIGTABLE_RPS`, default 800: the
requests a second the local "instance" serves at full CPU, as measured by
bench/bench_bigtable_capacity.py), capped at 1. A test or a demo
makes Bigtable busy by sending requests, or by lowering the capacity.
See docs/bigtable-ramp-and-bill.md.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime

from adapters.local.tcp_relay import TcpRelay
from shared.ports.bigtable_monitor import Sample

CAPACITY_ENV = "PIPELINE_LOCAL_BIGTABLE_RPS"
DEFAULT_CAPACITY_RPS = 800.0  # the emulator's saturation here: bench/bench_bigtable_capacity.py
PREFACE = len(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
HEADERS = 0x1


def capacity_from_env() -> float:
    """`PIPELINE_LOCAL_BIGTABLE_RPS`, a positive number of requests a second (default 800)."""
    text = os.environ.get(CAPACITY_ENV, "").strip()
    if not text:
        return DEFAULT_CAPACITY_RPS
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise ValueError(f"{CAPACITY_ENV}={text!r}: give a positive number of requests a second")
    return value


class FrameCounter:
    """Counts the HEADERS frames in a client's HTTP/2 byte stream, fed in arbitrary pieces
    (the connection preface first, then 9-byte frame headers and their payloads)."""

    def __init__(self) -> None:
        self._skip = PREFACE
        self._head = b""

    def feed(self, data: bytes) -> int:
        """The HEADERS frames that start in `data`."""
        count, i, n = 0, 0, len(data)
        while i < n:
            if self._skip:
                take = min(self._skip, n - i)
                self._skip -= take
                i += take
                continue
            piece = data[i : i + 9 - len(self._head)]
            self._head += piece
            i += len(piece)
            if len(self._head) == 9:
                length = int.from_bytes(self._head[:3], "big")
                count += self._head[3] == HEADERS
                self._skip, self._head = length, b""
        return count


class BigtableMeter(TcpRelay):
    """`BigtableMeter("127.0.0.1:PORT").start()`; clients use `meter.address`;
    `meter.rate(window_s)` is the requests a second over the last `window_s`."""

    def __init__(self, target: str, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(target, name="bigtable-meter")
        self.clock = clock
        self.total = 0
        self.bytes_in = 0  # what the clients sent: the writes, and the reads' requests
        self._lock = threading.Lock()
        self._seconds: deque[list[float]] = deque(maxlen=600)  # [second, requests]

    def start(self) -> BigtableMeter:
        super().start()
        return self

    def count(self, requests: int) -> None:
        """Note `requests` now."""
        if not requests:
            return
        second = float(int(self.clock()))
        with self._lock:
            self.total += requests
            if self._seconds and self._seconds[-1][0] == second:
                self._seconds[-1][1] += requests
            else:
                self._seconds.append([second, float(requests)])

    def rate(self, window_s: float = 10.0) -> float:
        """Requests a second over the last `window_s` seconds."""
        since = self.clock() - window_s
        with self._lock:
            recent = sum(n for second, n in self._seconds if second + 1 > since)
        return recent / window_s

    def open_stream(self, from_client: bool) -> FrameCounter | None:
        return FrameCounter() if from_client else None  # the requests: the client's frames

    def forward(self, data: bytes, from_client: bool, stream: FrameCounter | None) -> bool:
        if stream is not None:
            self.count(stream.feed(data))
            self.bytes_in += len(data)
        return True


class LocalBigtableMonitor:
    """`BigtableMonitor` of the local stack: the load from the meter's request rate; the
    stored bytes approximated by the bytes the clients sent (every table, uncompressed:
    `storage_exact` is False); the emulator has no nodes (empty)."""

    storage_exact = False
    storage_source = "bytes sent through the local Bigtable meter"

    def __init__(
        self, meter: BigtableMeter, capacity_rps: float | None = None, window_s: float = 10.0
    ) -> None:
        self.meter, self.window_s = meter, window_s
        self.capacity_rps = capacity_rps or capacity_from_env()

    @property
    def load_lag_s(self) -> float:
        """The load is a rate over the last `window_s`: a change shows in full after it."""
        return self.window_s

    def cpu_load(self, project: str, instance: str) -> float | None:
        return min(1.0, self.meter.rate(self.window_s) / self.capacity_rps)

    def table_bytes(
        self, project: str, instance: str, table: str, start: datetime, end: datetime
    ) -> list[Sample]:
        return [Sample(end, float(self.meter.bytes_in))]

    def node_counts(
        self, project: str, instance: str, start: datetime, end: datetime
    ) -> list[Sample]:
        return []
