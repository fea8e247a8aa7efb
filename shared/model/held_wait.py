"""How long PyChunkedGraph's ingest worker waits for a chunk another claim holds
(`PCG_HELD_MAX_WAIT_SEC`), and the least wait that never defers a dead pod's chunk. Pure.

The image's worker (`pychunkedgraph.pipeline.ingest` worker, read in its code) tries the
chunk's claim, and while another token holds it polls every `PCG_LOCK_POLL_SEC` (10 s) until
`PCG_HELD_MAX_WAIT_SEC` (120 s) have passed; then it defers the chunk as transient and the pod
exits 1. A hard-killed pod (a Spot preemption, since the images install no SIGTERM handler; an
OOM kill; a lost node) never releases its claim, which stays live for the claim lifetime
(the graph's `ROOT_LOCK_EXPIRY`, 3 minutes by default: shared.model.lock_renewal). So the
index's next pod, started at once, gives up after 120 s with 60 s of the claim left: every
preemption costs a retry of `job.task_retries`, though the Job's DisruptionTarget rule spent
none on the preempted pod itself.

The wait never defers such a chunk when it reaches past the lifetime plus one poll (the
claim lapses at most a lifetime after the replacement starts; the next poll after that takes
it). The controller writes twice that, so a slow Bigtable call or clock skew between the
dead pod's last renewal and the poll does not bring it back to the edge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

HELD_WAIT_ENV = "PCG_HELD_MAX_WAIT_SEC"
POLL_ENV = "PCG_LOCK_POLL_SEC"
# The image's defaults (its ingest worker: os.environ.get(..., 120) and (..., 10)).
IMAGE_HELD_WAIT_S = 120.0
IMAGE_POLL_S = 10.0
# What the controller writes over the minimum.
MARGIN = 2


class HeldWaitError(ValueError):
    """An operator's wait or poll the images cannot use safely; the message names the env key
    and the minimum."""


@dataclass(frozen=True)
class HeldWait:
    """The held-chunk wait of one build: the minimum that outlasts a dead pod's claim, and
    what the controller writes (MARGIN x the minimum, whole seconds up)."""

    lifetime_s: float
    poll_s: float

    @property
    def minimum_s(self) -> float:
        return self.lifetime_s + self.poll_s

    @property
    def written_s(self) -> int:
        return math.ceil(MARGIN * self.minimum_s)


def _positive(raw: str, key: str) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise HeldWaitError(f"env.{key}: {raw!r} is not a number of seconds > 0")
    return value


def held_wait(lifetime_s: float, operator_env: Mapping[str, str]) -> HeldWait:
    """The build's HeldWait: the claim lifetime and the poll the images use (the operator's
    `env.PCG_LOCK_POLL_SEC`, else the image's 10 s). HeldWaitError for a poll that is not a
    positive number."""
    poll = _positive(operator_env[POLL_ENV], POLL_ENV) if POLL_ENV in operator_env else None
    return HeldWait(lifetime_s, IMAGE_POLL_S if poll is None else poll)


def check_operator_wait(raw: str, wait: HeldWait) -> float:
    """An operator's `env.PCG_HELD_MAX_WAIT_SEC` as seconds, or HeldWaitError naming the key
    and the minimum when it would let a dead pod's claim defer its chunk."""
    value = _positive(raw, HELD_WAIT_ENV)
    if value < wait.minimum_s:
        raise HeldWaitError(
            f"env.{HELD_WAIT_ENV}: {raw} s is below the minimum of {wait.minimum_s:g} s, the "
            f"claim lifetime ({wait.lifetime_s:g} s: graph_config.ROOT_LOCK_EXPIRY, 3 min by "
            f"default) plus a poll ({wait.poll_s:g} s: {POLL_ENV}); a pod retrying a "
            "hard-killed pod's chunk would give up while the dead claim is live and spend a "
            f"retry. Remove it (the controller writes {wait.written_s} s) or give at least "
            f"{wait.minimum_s:g}"
        )
    return value
