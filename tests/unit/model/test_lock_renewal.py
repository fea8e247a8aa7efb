"""PCG_LOCK_EXPIRY_SCALE per layer: PyChunkedGraph images renew a chunk claim every
60 s x (L-1) x scale against a claim lifetime of graph_config.ROOT_LOCK_EXPIRY (3 min by
default, the same at every layer); the scale we write keeps the renewal at most a third of the
lifetime, and an operator's scale that breaks it is kept with a warning naming the layers."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from scripts.cli import main
from shared.config.config_files import config_from_dict
from shared.jobs.manifest import ManifestError, lock_scale_warning, render_job
from shared.jobs.render_check import validate_config_renders
from shared.model import lock_renewal as lr
from shared.model import worker_contract as wc
from tests.builders.contract_examples import CONFIG, DATASET, ENV


@pytest.mark.parametrize(
    ("layer", "scale", "renewal_s"),
    # Written by hand from the image's code: expiry = 3 min x (L-1) x scale, renew = expiry/3.
    [(2, 1.0, 60.0), (4, 1.0, 180.0), (6, 1.0, 300.0), (8, 1.0, 420.0), (5, 0.25, 60.0)],
)
def test_the_images_renewal_interval(layer, scale, renewal_s):
    assert lr.image_renewal_s(layer, scale) == pytest.approx(renewal_s)


@pytest.mark.parametrize(
    ("layer", "lifetime_s", "scale"),
    [
        # Default lifetime (3 min): 1/(L-1), six decimals rounded down.
        (2, 180, 1.0),
        (3, 180, 0.5),
        (4, 180, 0.333333),
        (5, 180, 0.25),
        (6, 180, 0.2),
        (7, 180, 0.166666),
        (8, 180, 0.142857),
        # A graph with ROOT_LOCK_EXPIRY 10 min, and a test's few seconds.
        (4, 600, 1.111111),
        (6, 3, 0.003333),
    ],
)
def test_safe_scale_per_layer(layer, lifetime_s, scale):
    got = lr.safe_scale(layer, lifetime_s)
    assert got == scale
    # The images then renew at most every third of the lifetime, and not much sooner.
    renewal = lr.image_renewal_s(layer, got)
    assert renewal <= lifetime_s / 3
    assert renewal > lifetime_s / 3 * 0.999
    assert lr.renewal_breaches(got, [layer], lifetime_s) == []


@pytest.mark.parametrize(
    ("dataset", "lifetime_s"),
    [
        (None, 180.0),
        ({}, 180.0),
        ({"graph_config": {"CHUNK_SIZE": [64] * 3}}, 180.0),
        ({"graph_config": {"ROOT_LOCK_EXPIRY": None}}, 180.0),
        ({"graph_config": {"ROOT_LOCK_EXPIRY": 600}}, 600.0),
        ({"graph_config": {"ROOT_LOCK_EXPIRY": 2.5}}, 2.5),
    ],
)
def test_claim_lifetime_is_root_lock_expiry_else_three_minutes(dataset, lifetime_s):
    assert lr.claim_lifetime_s(dataset) == lifetime_s


@pytest.mark.parametrize("raw", ["0:03:00", "3m", 0, -5, True, [180]])
def test_a_bad_root_lock_expiry_names_the_key(raw):
    with pytest.raises(lr.LockRenewalError, match=r"graph_config\.ROOT_LOCK_EXPIRY: .* seconds"):
        lr.claim_lifetime_s({"graph_config": {"ROOT_LOCK_EXPIRY": raw}})


@pytest.mark.parametrize(("raw", "value"), [("1", 1.0), ("0.25", 0.25), (" 2 ", 2.0)])
def test_an_operator_scale_is_a_positive_number(raw, value):
    assert lr.parse_scale(raw) == value


@pytest.mark.parametrize("raw", ["", "x", "0", "-1", "nan", "inf"])
def test_a_bad_operator_scale_names_the_key(raw):
    with pytest.raises(lr.LockRenewalError, match=r"env\.PCG_LOCK_EXPIRY_SCALE: .* number > 0"):
        lr.parse_scale(raw)


@pytest.mark.parametrize(
    ("scale", "layers", "lifetime_s", "breached", "lapsed"),
    [
        # The predecessor's scale 1 with the default lifetime: late from L3, lapsing from L4.
        (1.0, range(2, 9), 180, [3, 4, 5, 6, 7, 8], [4, 5, 6, 7, 8]),
        # Safe up to L6 (60 s at L6), late at L7 and L8 (72 s, 84 s) but renewed in time.
        (0.2, range(2, 7), 180, [], []),
        (0.2, range(2, 9), 180, [7, 8], []),
        # A long ROOT_LOCK_EXPIRY makes scale 1 safe.
        (1.0, range(2, 9), 1800, [], []),
    ],
)
def test_override_breaches_per_layer(scale, layers, lifetime_s, breached, lapsed):
    breaches = lr.renewal_breaches(scale, layers, lifetime_s)
    assert [b.layer for b in breaches] == breached
    assert [b.layer for b in breaches if b.renewal_s >= b.lifetime_s] == lapsed
    warning = lr.override_warning(scale, layers, lifetime_s)
    if not breached:
        assert warning is None
        return
    assert warning is not None and warning.startswith(f"env.PCG_LOCK_EXPIRY_SCALE={scale:g}")
    for b in breaches:
        assert f"L{b.layer} renews every {b.renewal_s:.0f} s" in warning
    assert f"claim lifetime of {lifetime_s} s" in warning
    assert ("lapses before it is renewed" in warning) == bool(lapsed)


def test_the_worker_env_writes_the_safe_scale_from_the_dataset():
    # Without ROOT_LOCK_EXPIRY: 1/(L-1); with it: lifetime / (180 s x (L-1)).
    assert ENV.to_env()[wc.LOCK_EXPIRY_SCALE] == "0.5"
    assert replace(ENV, layer=6).to_env()[wc.LOCK_EXPIRY_SCALE] == "0.2"
    graph_config = {**DATASET["graph_config"], "ROOT_LOCK_EXPIRY": 720}
    longer = replace(ENV, dataset={**DATASET, "graph_config": graph_config})
    assert longer.to_env()[wc.LOCK_EXPIRY_SCALE] == "2.0"
    # Our own worker's lock_expiry_s plays no part (it is not the images' claim).
    assert replace(ENV, lock_expiry_s=9999.0).to_env()[wc.LOCK_EXPIRY_SCALE] == "0.5"


def _cfg(env: dict[str, str]) -> Any:
    return config_from_dict({**CONFIG, "env": env}, DATASET)


def _container_env(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (e["name"], e["value"])
        for e in manifest["spec"]["template"]["spec"]["containers"][0]["env"]
    ]


def test_an_operator_scale_replaces_the_per_layer_one_once():
    manifest = render_job(_cfg({wc.LOCK_EXPIRY_SCALE: "1"}), "ingest", 4, run_id="r", parallelism=1)
    scales = [v for k, v in _container_env(manifest) if k == wc.LOCK_EXPIRY_SCALE]
    assert scales == ["1"]
    default = render_job(_cfg({}), "ingest", 4, run_id="r", parallelism=1)
    assert [v for k, v in _container_env(default) if k == wc.LOCK_EXPIRY_SCALE] == ["0.333333"]


def test_an_unsafe_operator_scale_is_kept_with_a_warning_naming_the_layers(caplog):
    cfg = _cfg({wc.LOCK_EXPIRY_SCALE: "1"})  # the grid has layers 2..5
    warning = lock_scale_warning(cfg)
    assert warning is not None
    assert "L3 renews every 120 s, L4 renews every 180 s, L5 renews every 240 s" in warning
    assert "L2" not in warning
    assert "at L4, L5 a live claim lapses" in warning
    with caplog.at_level(logging.WARNING, logger="shared.jobs.render_check"):
        validate_config_renders(cfg)
    assert [r.getMessage() for r in caplog.records] == [warning]


@pytest.mark.parametrize("env", [{}, {wc.LOCK_EXPIRY_SCALE: "0.25"}])
def test_no_warning_without_an_override_or_with_a_safe_one(env):
    assert lock_scale_warning(_cfg(env)) is None


def test_a_bad_operator_scale_fails_the_render_naming_the_key():
    cfg = _cfg({wc.LOCK_EXPIRY_SCALE: "fast"})
    with pytest.raises(ManifestError, match=r"env\.PCG_LOCK_EXPIRY_SCALE: 'fast'"):
        render_job(cfg, "ingest", 3, run_id="r", parallelism=1)
    with pytest.raises(ManifestError, match=r"env\.PCG_LOCK_EXPIRY_SCALE"):
        lock_scale_warning(cfg)


def test_validate_and_render_print_the_warning(tmp_path):
    (tmp_path / "ws").mkdir()  # the watershed: validate looks for a local one
    (tmp_path / "dataset.yml").write_text(
        "data_source: {size: [512, 384, 192], watershed: ws}\n"
        "graph_config: {CHUNK_SIZE: [64, 64, 64]}\n"
    )
    (tmp_path / "pipeline.yml").write_text(
        yaml.safe_dump({**CONFIG, "env": {wc.LOCK_EXPIRY_SCALE: "1"}})
    )
    path = str(tmp_path / "pipeline.yml")
    for args in (["validate", "-c", path], ["render", "-c", path, "ingest", "3"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        assert "warning: env.PCG_LOCK_EXPIRY_SCALE=1 (yours, kept): L3 renews every 120 s" in (
            result.stderr
        )
        assert "warning" not in result.stdout


def test_a_dataset_root_lock_expiry_sets_the_scale_of_every_rendered_job():
    """Through the config: PyChunkedGraph's graph_config keys pass through to the pods'
    dataset, and the lifetime is read from there (a config that refused the key would fail
    here, not skip: the image reads it)."""
    graph_config = {**DATASET["graph_config"], "ROOT_LOCK_EXPIRY": 720}
    cfg = config_from_dict(CONFIG, {**DATASET, "graph_config": graph_config})
    for layer, scale in [(2, "4.0"), (3, "2.0"), (5, "1.0")]:
        manifest = render_job(cfg, "ingest", layer, run_id="r", parallelism=1)
        assert dict(_container_env(manifest))[wc.LOCK_EXPIRY_SCALE] == scale
    # Scale 1 renews every 240 s at L5: within a third of 720 s, so no warning.
    assert lock_scale_warning(_cfg_with(cfg, {wc.LOCK_EXPIRY_SCALE: "1"})) is None


def _cfg_with(cfg: Any, env: dict[str, str]) -> Any:
    return cfg.model_copy(update={"env": env})


# Tables that kill mutants the mutation runner found alive (docs/testing-mutation.md).


@pytest.mark.parametrize(
    ("scale", "layers", "lifetime_s", "want"),
    [
        (
            1.0,
            range(2, 6),
            180,
            "env.PCG_LOCK_EXPIRY_SCALE=1 (yours, kept): L3 renews every 120 s, L4 renews every "
            "180 s, L5 renews every 240 s, against a claim lifetime of 180 s (the graph's "
            "ROOT_LOCK_EXPIRY, 3 min by default); the images need a renewal at most every "
            "60 s; at L4, L5 a live claim lapses before it is renewed and a contender can "
            "take a chunk that is still being written. Remove it to get a safe scale per layer",
        ),
        (  # late but renewed in time: no lapse clause; a short lifetime in 3 digits
            0.02,
            range(2, 4),
            3,
            "env.PCG_LOCK_EXPIRY_SCALE=0.02 (yours, kept): L2 renews every 1.2 s, L3 renews "
            "every 2.4 s, against a "
            "claim lifetime of 3 s (the graph's ROOT_LOCK_EXPIRY, 3 min by default); the "
            "images need a renewal at most every 1 s. Remove it to get a safe scale per layer",
        ),
        (  # 10 s and more are printed whole (10.5 s as "10 s")
            0.175,
            range(2, 3),
            30,
            "env.PCG_LOCK_EXPIRY_SCALE=0.175 (yours, kept): L2 renews every 10 s, against "
            "a claim lifetime of 30 s (the graph's ROOT_LOCK_EXPIRY, 3 min by default); the "
            "images need a renewal at most every 10 s. Remove it to get a safe scale per layer",
        ),
    ],
)
def test_override_warning_text(scale, layers, lifetime_s, want):
    from shared.model.lock_renewal import override_warning

    assert override_warning(scale, layers, lifetime_s) == want


def test_claim_lifetime_edges_and_messages():
    from shared.model.lock_renewal import LockRenewalError, claim_lifetime_s, parse_scale

    assert claim_lifetime_s({"graph_config": ["not", "a", "mapping"]}) == 180.0
    assert claim_lifetime_s({"graph_config": {"ROOT_LOCK_EXPIRY": 0.5}}) == 0.5  # under 1 s
    with pytest.raises(LockRenewalError) as bad:
        claim_lifetime_s({"graph_config": {"ROOT_LOCK_EXPIRY": 0}})
    assert str(bad.value) == (
        "graph_config.ROOT_LOCK_EXPIRY: 0 is not a number of seconds > 0; give the claim "
        "lifetime in seconds (e.g. 180) or drop it for the 3-minute default"
    )
    with pytest.raises(LockRenewalError) as bad:
        parse_scale("-1")
    assert str(bad.value) == (
        "env.PCG_LOCK_EXPIRY_SCALE: '-1' is not a number > 0; remove it (the controller sets "
        "a safe value per layer) or give a positive number"
    )


def test_a_renewal_half_a_second_late_is_a_breach():
    from shared.model.lock_renewal import renewal_breaches

    scale = 60.5 * 3 / 180  # L2 renews every 60.5 s against a 60 s bound (180 s lifetime)
    assert [b.layer for b in renewal_breaches(scale, [2], 180.0)] == [2]
    assert renewal_breaches(1.0, [2], 180.0) == []  # exactly at the bound: not a breach


@pytest.mark.parametrize("raw", [180, 2.5, "0:03:00", "3 minutes"])
@pytest.mark.parametrize("setup", [False, True])
def test_root_lock_expiry_is_refused_where_an_image_reads_the_dataset(tmp_path, raw, setup):
    """Issue 26.5: PyChunkedGraph's ingest setup hands the dataset file's ROOT_LOCK_EXPIRY to
    GraphConfig unconverted and calls .total_seconds() on it; no YAML value is a timedelta."""
    from shared.jobs.manifest import ManifestError, render_job
    from shared.jobs.setup_job import render_setup_job
    from tests.builders.toy_jobs import make_config

    pipeline = {"commands": {"ingest": ["python", "-m", "pychunkedgraph.pipeline.ingest"]}}
    cfg = make_config(tmp_path, pipeline, {"graph_config": {"ROOT_LOCK_EXPIRY": raw}})
    with pytest.raises(ManifestError, match=r"graph_config\.ROOT_LOCK_EXPIRY: .*timedelta"):
        if setup:
            render_setup_job(cfg, "ingest", run_id="r")
        else:
            render_job(cfg, "ingest", 2, run_id="r", parallelism=1)


@pytest.mark.parametrize("dataset", [{}, {"graph_config": {}}])
def test_without_root_lock_expiry_the_images_render(tmp_path, dataset):
    from shared.jobs.manifest import render_job
    from tests.builders.toy_jobs import make_config

    pipeline = {"commands": {"ingest": ["python", "-m", "pychunkedgraph.pipeline.ingest"]}}
    lr.check_root_lock_expiry_for_images(dataset)
    assert render_job(
        make_config(tmp_path, pipeline, dataset), "ingest", 2, run_id="r", parallelism=1
    )


def test_our_worker_keeps_reading_root_lock_expiry_as_seconds(tmp_path):
    """Our worker's pods do not hand the key to an image's GraphConfig: a number stays the
    seconds the scale is computed from (tests above), and the Job renders."""
    from shared.jobs.manifest import render_job
    from tests.builders.toy_jobs import make_config

    cfg = make_config(tmp_path, {}, {"graph_config": {"ROOT_LOCK_EXPIRY": 600}})
    assert render_job(cfg, "ingest", 2, run_id="r", parallelism=1)
