"""What pods that run an image's own entry point (PyChunkedGraph's, pcgl2cache's) get beyond
the worker contract: their grace period and the image knobs pinned for them. Pure.

Those images run the predecessor's `cave_pipeline.distribution` harness, which installs no
SIGTERM handler (read in its code: no `signal` use): on a Spot notice or a Job teardown the
process dies at once, and any grace period is only time the node waits on a dead pod. So they
get 5 s, the predecessor's newest `GRACE_SECONDS`. Our own worker (`python -m worker`) does
handle SIGTERM: it finishes at most the current chunk and releases its claims within
PCG_TERM_GRACE_S (15 s by default), so it keeps Spot's whole 25 s notice.

A stage runs an image's entry point when it has `commands.<stage>`
(shared.jobs.worker_pod.runs_worker_image), the criterion the mounts already use.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.model import worker_contract
from shared.model.held_wait import HELD_WAIT_ENV

# Spot gives 25 s between the preemption notice and the kill; our worker needs them to
# finish a chunk and release its claims (worker/env.py PCG_TERM_GRACE_S, 15 s, fits).
WORKER_GRACE_S = 25
# The images die on SIGTERM at once: waiting longer only delays every teardown (the value
# lives in the contract module, which the import notes read too).
IMAGE_GRACE_S = worker_contract.IMAGE_GRACE_S
PROFILER_ENV = worker_contract.PROFILER_ENV
# PyChunkedGraph's hierarchical profiler (pychunkedgraph.debug.profiler) defaults to on in
# some image versions (`os.environ.get("PCG_PROFILER_ENABLED", "1")`), off in others: pinned
# off, so a build does not time every block nor depend on the image's version. The operator's
# `env:` may turn it on.
PINNED_IMAGE_ENV: Mapping[str, str] = {PROFILER_ENV: "0"}


def grace_seconds(runs_our_worker: bool) -> int:
    """terminationGracePeriodSeconds of a pod: WORKER_GRACE_S for our worker, else
    IMAGE_GRACE_S."""
    return WORKER_GRACE_S if runs_our_worker else IMAGE_GRACE_S


def pinned_env(
    runs_our_worker: bool, operator_env: Mapping[str, str], held_wait_s: int | None = None
) -> dict[str, str]:
    """The image knobs pinned for a pod that runs an image's entry point, less what the
    operator's `env:` sets (theirs wins, checked in shared.jobs.manifest); none for our worker,
    which reads none of them. `held_wait_s`: PCG_HELD_MAX_WAIT_SEC (ingest pods only, the one
    stage whose image worker claims chunks; shared.model.held_wait)."""
    if runs_our_worker:
        return {}
    pins = dict(PINNED_IMAGE_ENV)
    if held_wait_s is not None:
        pins[HELD_WAIT_ENV] = str(held_wait_s)
    return {k: v for k, v in pins.items() if k not in operator_env}
