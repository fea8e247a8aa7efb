"""shared.model.held_wait and its use in the rendered Jobs: PyChunkedGraph's ingest worker must
wait for a held chunk longer than a hard-killed pod's claim lives, plus a poll, or every
preemption spends a retry. Table-driven; the image's loop is simulated to show why."""

from __future__ import annotations

import pytest

from shared.jobs.manifest import ManifestError, render_job
from shared.jobs.render_check import validate_config_renders
from shared.model.held_wait import (
    IMAGE_HELD_WAIT_S,
    IMAGE_POLL_S,
    HeldWait,
    HeldWaitError,
    check_operator_wait,
    held_wait,
)
from tests.builders.toy_jobs import env_of, make_config

PCG_INGEST = ["python", "-m", "pychunkedgraph.pipeline.ingest"]


def image_defers(wait_s: float, poll_s: float, claim_left_s: float) -> bool:
    """The image's ingest loop (read in its code): try the claim; held: give up once the
    deadline passed, else sleep a poll. True when it defers a chunk whose dead claim lapses
    `claim_left_s` after the pod starts."""
    t = 0.0
    while True:
        if t >= claim_left_s:  # the claim lapsed: acquired
            return False
        if t >= wait_s:
            return True
        t += poll_s


@pytest.mark.parametrize(
    ("lifetime", "env", "minimum", "written"),
    [
        (180.0, {}, 190.0, 380),  # the defaults: 3-minute claim, 10 s poll
        (600.0, {}, 610.0, 1220),  # ROOT_LOCK_EXPIRY 600 s
        (180.0, {"PCG_LOCK_POLL_SEC": "30"}, 210.0, 420),  # the operator's poll
        (2.5, {"PCG_LOCK_POLL_SEC": "0.2"}, 2.7, 6),  # rounded up to whole seconds
    ],
)
def test_the_written_wait_outlasts_a_dead_claim(lifetime, env, minimum, written):
    wait = held_wait(lifetime, env)
    assert (wait.minimum_s, wait.written_s) == (pytest.approx(minimum), written)
    # A replacement pod starting right after the kill sees the whole lifetime left.
    assert not image_defers(wait.written_s, wait.poll_s, lifetime)
    assert not image_defers(wait.minimum_s, wait.poll_s, lifetime)


def test_the_images_default_spends_a_retry_per_preemption():
    # 120 s against a 180 s claim: the pod defers the chunk and exits 1.
    assert image_defers(IMAGE_HELD_WAIT_S, IMAGE_POLL_S, 180.0)


@pytest.mark.parametrize(
    ("raw", "ok"),
    [("190", True), ("380", True), ("189.9", False), ("120", False), ("0", False), ("x", False)],
)
def test_an_operators_wait_is_checked_against_the_minimum(raw, ok):
    wait = HeldWait(lifetime_s=180.0, poll_s=10.0)
    if ok:
        assert check_operator_wait(raw, wait) == float(raw)
    else:
        with pytest.raises(HeldWaitError, match=r"env\.PCG_HELD_MAX_WAIT_SEC"):
            check_operator_wait(raw, wait)


def test_the_refusal_names_the_minimum():
    with pytest.raises(HeldWaitError, match=r"below the minimum of 190 s.*at least 190"):
        check_operator_wait("120", HeldWait(180.0, 10.0))


@pytest.mark.parametrize("poll", ["0", "-1", "ten"])
def test_a_bad_poll_is_named(poll):
    with pytest.raises(HeldWaitError, match=r"env\.PCG_LOCK_POLL_SEC"):
        held_wait(180.0, {"PCG_LOCK_POLL_SEC": poll})


@pytest.mark.parametrize(
    ("pipeline", "dataset", "stage", "expected"),
    [
        ({"commands": {"ingest": PCG_INGEST}}, {}, "ingest", "380"),
        (
            {"commands": {"ingest": PCG_INGEST}, "env": {"PCG_HELD_MAX_WAIT_SEC": "500"}},
            {},
            "ingest",
            "500",
        ),
        ({}, {}, "ingest", None),  # our worker does not read it
        (
            {"commands": {"l2cache": ["python", "-m", "pcgl2cache.pipeline.l2cache"]}},
            {},
            "l2cache",
            None,
        ),
    ],
)
def test_every_layer_of_an_image_ingest_gets_the_wait(tmp_path, pipeline, dataset, stage, expected):
    extra = {"l2cache_config": {"table_id": "t"}} if stage == "l2cache" else {}
    cfg = make_config(tmp_path, pipeline, {**dataset, **extra})
    for layer in (2, 3, 4, 5):
        env = env_of(render_job(cfg, stage, layer, run_id="r", parallelism=1))
        assert env.get("PCG_HELD_MAX_WAIT_SEC") == expected, layer


@pytest.mark.parametrize("stage", ["ingest", "meshing"])
def test_a_short_operator_wait_is_refused_where_the_scale_is(tmp_path, stage):
    """As a bad env.PCG_LOCK_EXPIRY_SCALE: when the Jobs are rendered (`pipeline validate`,
    `pipeline start`, the render check), naming the key and the minimum, at every stage (the
    value reaches every pod)."""
    pipeline = {"commands": {"ingest": PCG_INGEST}, "env": {"PCG_HELD_MAX_WAIT_SEC": "120"}}
    cfg = make_config(tmp_path, pipeline, {"mesh_config": {}})
    want = r"env\.PCG_HELD_MAX_WAIT_SEC: 120 s is below the minimum of 190 s.*at least 190"
    with pytest.raises(ManifestError, match=want):
        render_job(cfg, stage, 2, run_id="r", parallelism=1)
    with pytest.raises(ManifestError, match=want):
        validate_config_renders(cfg)
