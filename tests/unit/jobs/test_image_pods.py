"""shared.jobs.image_pods: the grace period and pinned knobs of pods that run an image's own
entry point (PyChunkedGraph's harness installs no SIGTERM handler) against our worker's."""

from __future__ import annotations

import pytest

from shared.jobs.image_pods import IMAGE_GRACE_S, WORKER_GRACE_S, grace_seconds, pinned_env
from shared.jobs.manifest import render_job
from shared.jobs.setup_job import render_setup_job
from tests.builders.toy_jobs import env_of, make_config, pod_spec

PCG_INGEST = ["python", "-m", "pychunkedgraph.pipeline.ingest"]


@pytest.mark.parametrize(
    ("ours", "operator_env", "grace", "pinned"),
    [
        (False, {}, 5, {"PCG_PROFILER_ENABLED": "0"}),
        (False, {"PCG_PROFILER_ENABLED": "1"}, 5, {}),  # the operator's value wins
        (True, {}, 25, {}),  # our worker reads none of the images' knobs
    ],
)
def test_grace_and_pins(ours, operator_env, grace, pinned):
    assert grace_seconds(ours) == grace
    assert pinned_env(ours, operator_env) == pinned


def test_the_grace_periods_fit_their_workers():
    # Our worker's SIGTERM path (finish a chunk, release claims) has PCG_TERM_GRACE_S, 15 s
    # by default, inside Spot's 25 s notice; the images need none.
    assert (WORKER_GRACE_S, IMAGE_GRACE_S) == (25, 5)


@pytest.mark.parametrize(
    ("pipeline", "grace", "profiler"),
    [
        ({}, 25, None),  # our worker: Spot's notice, no image knob
        ({"commands": {"ingest": PCG_INGEST}}, 5, "0"),
        ({"commands": {"ingest": PCG_INGEST}, "env": {"PCG_PROFILER_ENABLED": "1"}}, 5, "1"),
    ],
)
def test_rendered_layer_and_setup_jobs(tmp_path, pipeline, grace, profiler):
    cfg = make_config(tmp_path, pipeline)
    layer = render_job(cfg, "ingest", 3, run_id="r", parallelism=1)
    setup = render_setup_job(cfg, "ingest", run_id="r")
    for job in (layer, setup):
        assert pod_spec(job)["terminationGracePeriodSeconds"] == grace
        assert env_of(job).get("PCG_PROFILER_ENABLED") == profiler  # one entry (env_of checks)
