"""CAVE registration from `cave_config` (shared.operate.cave_registration): the request as the
predecessor and PCGL2Cache make it, the token from the CAVE secret, and what each of
middle_auth's answers means (docs/setup-passes.md#cave-registration)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared.config.config_files import load_config
from shared.operate.cave_registration import (
    ALERT_KIND,
    CaveConfigIncomplete,
    Outcome,
    TokenMissing,
    failure_alert,
    outcome,
    registration_for,
    token_from_secret,
)
from shared.ports.cave_auth import Answer, CaveRegistration

DEMO = load_config(Path(__file__).resolve().parents[3] / "examples" / "demo" / "pipeline.yml")
REG = CaveRegistration("https://cave.example/", "ds", "pychunkedgraph", "demo")


def with_cave(cave_config):
    ds = DEMO.ds.model_copy(update={"cave_config": cave_config})
    return DEMO.model_copy(update={"dataset_config": ds})


@pytest.mark.parametrize(
    ("cave_config", "url"),
    [
        (None, None),
        ({"host": "https://h/", "dataset": "ds"},
         "https://h/sticky_auth/api/v1/service/pychunkedgraph/table/demo/dataset/ds"),
        ({"host": "https://h", "dataset": "ds", "service": "svc", "other": 1},
         "https://h/sticky_auth/api/v1/service/svc/table/demo/dataset/ds"),
    ],
)  # fmt: skip
def test_the_registration_the_block_asks_for(cave_config, url):
    reg = registration_for(with_cave(cave_config))
    assert (reg.url if reg else None) == url


@pytest.mark.parametrize(
    ("cave_config", "lacking"), [({}, "host or dataset"), ({"host": "h"}, "dataset")]
)
def test_a_block_without_host_or_dataset_is_named(cave_config, lacking):
    with pytest.raises(CaveConfigIncomplete, match=f"no {lacking}"):
        registration_for(with_cave(cave_config))


@pytest.mark.parametrize(
    ("files", "token", "error"),
    [
        ({"cave-secret.json": b'{"token": "t0k"}'}, "t0k", None),
        ({}, None, "no cave-secret.json in secret_files"),
        ({"cave-secret.json": b"not json"}, None, 'not a JSON object with a "token"'),
        ({"cave-secret.json": b'{"token": "placeholder"}'}, None, "placeholder"),
        ({"cave-secret.json": b'{"token": ""}'}, None, "empty"),
    ],
)
def test_the_token_comes_from_the_cave_secret(files, token, error):
    if error is None:
        assert token_from_secret(files) == token
    else:
        with pytest.raises(TokenMissing, match=error):
            token_from_secret(files)


@pytest.mark.parametrize(
    ("answer", "want", "says"),
    [
        (Answer(200, '"success"'), Outcome.REGISTERED, "registered with CAVE dataset ds"),
        (Answer(422, "Table mapping already exists.", "ds"), Outcome.ALREADY, "already registered"),
        (Answer(422, "Table mapping already exists.", "other"), Outcome.FAILED,
         "already mapped to other, not ds"),
        (Answer(422, "Table mapping already exists.", ""), Outcome.FAILED,
         "a dataset that could not be read"),
        (Answer(404, "Dataset does not exist."), Outcome.FAILED, "CAVE has no dataset 'ds'"),
        (Answer(403, "Requires admin privilege."), Outcome.FAILED, "token was refused (HTTP 403"),
        (Answer(500, "boom"), Outcome.FAILED, "HTTP 500 boom"),
    ],
)  # fmt: skip
def test_what_each_answer_means(answer, want, says):
    got, line = outcome(REG, answer)
    assert got is want and says in line


def test_the_alert_says_the_build_goes_on_and_how_to_register_by_hand():
    body = failure_alert(
        "r1", "demo", "CAVE registration of demo failed: x", REG, datetime.now(UTC)
    )
    assert body["kind"] == ALERT_KIND and body["run_id"] == "r1" and body["layer"] == 0
    assert body["fix"].startswith("the build goes on; register by hand: curl -X POST")
    assert REG.url in body["fix"] and "$CAVE_TOKEN" in body["fix"]
