"""Per-pod runtimes for the simulator: a lognormal around a per-chunk time, or a finished
run's recorded pods. Pure module (the caller reads the recorded run)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from shared.model.state import RunState


@dataclass(frozen=True)
class PodRun:
    """One pod's run: its seconds, the first `startup_s` of them before its first chunk."""

    seconds: float
    startup_s: float


@dataclass(frozen=True)
class Runtimes:
    """Seconds one pod (one batch) takes: sampled per layer key (`ingest-L3`)."""

    chunk_seconds: float = 30.0
    sigma: float = 0.5  # lognormal shape of one chunk's time
    pod_overhead_s: float = 10.0  # image start, clients, lock claims: per pod, not per chunk
    # layer key -> recorded pod runtimes (seconds, whole pods) of a finished run
    recorded: dict[str, list[float]] = field(default_factory=dict)

    def sample(self, rng: random.Random, key: str, chunks: int, batch: int | None = None) -> float:
        """One pod's runtime for `chunks` chunks of a batch of `batch` (default: all of it)."""
        return self.pod_run(rng, key, chunks, batch).seconds

    def pod_run(
        self, rng: random.Random, key: str, chunks: int, batch: int | None = None
    ) -> PodRun:
        """One pod's run for `chunks` chunks of a batch of `batch` (default: all of it), with
        its start-up: the start-up per pod, or all of a recorded pod shorter than that."""
        observed = self.recorded.get(key)
        if observed:
            whole = rng.choice(observed)  # a recorded pod did a whole batch
            start = min(self.pod_overhead_s, whole)
            if batch is None or chunks >= batch:
                return PodRun(whole, start)
            return PodRun(start + (whole - start) * chunks / batch, start)
        if chunks <= 0:
            return PodRun(self.pod_overhead_s, self.pod_overhead_s)
        # The sum of `chunks` lognormal chunk times, by its own lognormal (Fenton-Wilkinson):
        # one draw per pod, however many chunks it holds.
        mean = self.chunk_seconds
        var = (math.exp(self.sigma**2) - 1) * mean**2
        total_mean, total_var = chunks * mean, chunks * var
        s2 = math.log(1 + total_var / total_mean**2)
        mu = math.log(total_mean) - s2 / 2
        work = rng.lognormvariate(mu, math.sqrt(s2))
        return PodRun(self.pod_overhead_s + work, self.pod_overhead_s)


def recorded_runtimes(
    run: RunState, pods: dict[str, list[float]] | None = None
) -> dict[str, list[float]]:
    """Per-layer pod runtimes of a finished run: its recorded pod attempts where given, else
    each layer's mean succeeded runtime (what the layer document keeps)."""
    out: dict[str, list[float]] = {}
    for key, ls in run.layers.items():
        if pods and pods.get(key):
            out[key] = list(pods[key])
        elif ls.pods.succeeded:
            out[key] = [ls.pods.succeeded_runtime_s / ls.pods.succeeded]
    return out
