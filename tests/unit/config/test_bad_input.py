"""Bad input gets a clear error naming the field, never a crash or a redelivery loop.

Config files with a wrong type, an out-of-range value, a typo or a missing file; malformed
Pub/Sub envelopes and Job-event LogEntries (bad base64, not JSON, wrong shapes, oversized).
Table-driven for the named cases, hypothesis for everything else: the loader and the decoders
may only ever raise their own error type.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cloudevents.http import CloudEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.config.config import ConfigError
from shared.config.config_files import load_config
from shared.control.job_events import BadEventError, parse_log_entry

PIPELINE = {
    "graph_id": "toy",
    "dataset": "dataset.yml",
    "bigtable": {"project": "p", "instance": "i"},
    "images": {"ingest": "img:1"},
    "workloads": {"ingest": "pcg.ingest:process_chunk"},
}
DATASET = {"data_source": {"size": [512, 384, 192]}, "graph_config": {"CHUNK_SIZE": [64] * 3}}


def _write(tmp: Path, pipeline: Any, dataset: Any = DATASET) -> Path:
    (tmp / "dataset.yml").write_text(yaml.safe_dump(dataset))
    (tmp / "pipeline.yml").write_text(yaml.safe_dump(pipeline))
    return tmp / "pipeline.yml"


def _set(doc: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(doc))
    node = out
    *parents, leaf = dotted.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return out


# (dotted path, bad value, what the message must name)
PIPELINE_CASES = [
    ("graph_id", "Has Spaces", "graph_id"),
    ("graph_id", 12, "graph_id"),
    ("bigtable.project", None, "bigtable.project"),
    ("bigtable.instancee", "i", "bigtable.instancee"),  # typo
    ("job.batch_size", 0, "job.batch_size"),
    ("job.batch_size", -5, "job.batch_size"),
    ("job.batch_size", "many", "job.batch_size"),
    ("job.perm_seed", -1, "job.perm_seed"),
    ("job.task_retries", -1, "job.task_retries"),
    ("job.max_failed_tasks", "x", "job.max_failed_tasks"),
    ("job.lock_expiry_s", 0, "job.lock_expiry_s"),
    ("job.ramp.start", 0, "job.ramp.start"),
    ("job.ramp.factor", 0.5, "job.ramp.factor"),
    ("job.ramp.period", 0, "job.ramp.period"),
    ("job.ramp.max", 0, "job.ramp.max"),
    ("job.ramp.maxx", 3, "job.ramp.maxx"),  # typo
    ("job.resources.cpu.base", 0, "job.resources.cpu.base"),
    ("job.resources.memory.base", -1, "job.resources.memory.base"),
    ("job.resources.cpu", "two", "job.resources.cpu"),
    ("job.workloads.ingest.batch_size", 0, "job.workloads.ingest.batch_size"),
    ("job.workloads.ingset", {}, "job.workloads.ingset"),  # typo of a stage
    ("images.ingst", "img:1", "images.ingst"),
    ("workloads.ingest", 3, "workloads.ingest"),
    ("controller.advance", "sometimes", "controller.advance"),
    ("controller.budget_usd", 0, "controller.budget_usd"),
    ("controller.tick_period_s", -1, "controller.tick_period_s"),
    ("controller.stall_after_s", "soon", "controller.stall_after_s"),
    ("env", ["A=1"], "env"),
    ("commands.ingest", "python -m x", "commands.ingest"),
    ("jobb", {}, "jobb"),  # typo at the top
]
DATASET_CASES = [
    ("data_source.size", [512, 384], "data_source.size"),
    ("data_source.size", [0, 1, 1], "data_source.size"),
    ("data_source.size", "big", "data_source.size"),
    ("graph_config.CHUNK_SIZE", [64, 64], "graph_config.CHUNK_SIZE"),
    ("graph_config.FANOUT", 3, "graph_config.FANOUT"),
    ("graph_config.SPATIAL_BITS", 0, "graph_config.SPATIAL_BITS"),
    ("graph_config.CHUNKSIZE", [64] * 3, "graph_config.CHUNKSIZE"),  # typo
    ("mesh_config.max_layer", 1, "mesh_config.max_layer"),
]


@pytest.mark.parametrize("path, value, named", PIPELINE_CASES, ids=lambda v: str(v)[:30])
def test_a_bad_pipeline_field_is_named(tmp_path, path, value, named):
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, _set(PIPELINE, path, value)))
    assert named in str(err.value) and "pipeline.yml" in str(err.value)


@pytest.mark.parametrize("path, value, named", DATASET_CASES, ids=lambda v: str(v)[:30])
def test_a_bad_dataset_field_is_named(tmp_path, path, value, named):
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, PIPELINE, _set(DATASET, path, value)))
    assert named in str(err.value) and "dataset.yml" in str(err.value)


@pytest.mark.parametrize(
    ("path", "value", "said"),
    [
        ("job.batchsize", 5, "job.batchsize: unknown key (did you mean job.batch_size?)"),
        ("job.ramp.strat", 2, "job.ramp.strat: unknown key (did you mean job.ramp.start?)"),
        (
            "job.workloads.ingest.batchsize",
            5,
            "job.workloads.ingest.batchsize: unknown key "
            "(did you mean job.workloads.ingest.batch_size?)",
        ),
        ("controler", {}, "controler: unknown key (did you mean controller?)"),
        ("images.ingst", "i", "images.ingst: unknown stage (did you mean images.ingest?)"),
        ("job.zzz", 1, "job.zzz: unknown key (typo?)"),  # nothing near: no guess
    ],
)
def test_an_unknown_key_names_the_near_known_one(tmp_path, path, value, said):
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, _set(PIPELINE, path, value)))
    assert f"\n  {said}" in str(err.value), str(err.value)


def test_a_misspelt_required_key_is_named_with_the_missing_one(tmp_path):
    """graph_config passes PyChunkedGraph's keys through, so a misspelt CHUNK_SIZE is no
    unknown-key error of its own: the missing key's error names it."""
    graph = {"CHUNK_SIZ": [64] * 3, "FANOUT": 2}
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, PIPELINE, {**DATASET, "graph_config": graph}))
    lines = str(err.value).splitlines()
    assert lines[0] == f"{tmp_path / 'dataset.yml'}: invalid configuration"
    assert lines[1:] == [
        "  graph_config.CHUNK_SIZ: unknown key (did you mean graph_config.CHUNK_SIZE?)",
        "  graph_config.CHUNK_SIZE: Field required",
    ]


@pytest.mark.parametrize(
    ("dataset", "said"),
    [
        (
            {
                "data_source": {"size": [64] * 3, "watershd": "x"},
                "graph_config": DATASET["graph_config"],
            },
            "data_source.watershd: unknown key (did you mean data_source.watershed?)",
        ),
        (
            {**DATASET, "graph_config": {"CHUNK_SIZE": [64] * 3, "SPATIAL_BIT": 10}},
            "graph_config.SPATIAL_BIT: not a PyChunkedGraph graph_config key "
            "(did you mean graph_config.SPATIAL_BITS?)",
        ),
    ],
)
def test_an_unknown_dataset_key_names_the_near_known_one(tmp_path, dataset, said):
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, PIPELINE, dataset))
    assert f"\n  {said}" in str(err.value), str(err.value)


def test_a_missing_dataset_file_says_where_it_was_named(tmp_path):
    (tmp_path / "conf").mkdir()
    pipeline = tmp_path / "conf" / "pipeline.yml"
    pipeline.write_text(yaml.safe_dump({**PIPELINE, "dataset": "../data/ds.yml"}))
    with pytest.raises(ConfigError) as err:
        load_config(pipeline)
    assert str(err.value) == (
        f"{tmp_path / 'data' / 'ds.yml'}: file not found (named by `dataset: ../data/ds.yml` "
        f"in {pipeline}, relative to its folder)"
    )


def test_the_good_config_loads(tmp_path):
    """The baseline the cases above break: without the break, it loads."""
    assert load_config(_write(tmp_path, PIPELINE)).graph_id == "toy"


@pytest.mark.parametrize(
    "setup, named",
    [
        (lambda tmp: tmp / "missing.yml", "missing.yml: file not found"),
        (lambda tmp: _write(tmp, {**PIPELINE, "dataset": "nope.yml"}), "nope.yml: file not found"),
        (lambda tmp: _text(tmp, "graph_id: [unclosed"), "not valid YAML"),
        (lambda tmp: _text(tmp, "- a list\n- not a mapping"), "expected a mapping"),
        (lambda tmp: _text(tmp, ""), "expected a mapping"),
    ],
    ids=["missing", "missing-dataset", "yaml", "list", "empty"],
)
def test_unreadable_files_are_named(tmp_path, setup, named):
    with pytest.raises(ConfigError, match=named):
        load_config(setup(tmp_path))


def _text(tmp: Path, text: str) -> Path:
    (tmp / "pipeline.yml").write_text(text)
    return tmp / "pipeline.yml"


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
FIELDS = [p for p, _, _ in PIPELINE_CASES]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=st.sampled_from(FIELDS), value=JSONISH)
def test_fuzzed_config_values_raise_only_config_errors(tmp_path, path, value):
    try:
        load_config(_write(tmp_path, _set(PIPELINE, path, value)))
    except ConfigError:
        pass


# ------------------------------------------------------------------------- envelopes, events


def _functions_module():
    """functions/main.py as the runtime loads it (a file, not a package import)."""
    import importlib.util

    root = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("functions_main", root / "functions" / "main.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


MAIN = _functions_module()
ATTRS = {
    "id": "m1",
    "source": "//pubsub.googleapis.com/projects/p/topics/job-events",
    "type": "google.cloud.pubsub.topic.v1.messagePublished",
    "specversion": "1.0",
}


@pytest.mark.parametrize(
    "data",
    [
        None,
        "a string",
        {},
        {"message": "not an object"},
        {"message": {"data": "%%% not base64 %%%"}},
        {"message": {"data": 12}},
        {"message": {"data": base64.b64encode(b"x").decode(), "attributes": "oops"}},
    ],
    ids=["none", "string", "empty", "message-str", "bad-b64", "data-int", "attrs-str"],
)
def test_malformed_envelopes_are_bad_messages(data):
    with pytest.raises(MAIN.BadMessageError):
        MAIN.pubsub_message(CloudEvent(ATTRS, data))


@settings(max_examples=300, deadline=None)
@given(data=JSONISH)
def test_fuzzed_envelopes_raise_only_bad_message(data):
    try:
        payload, attributes = MAIN.pubsub_message(CloudEvent(ATTRS, data))
    except MAIN.BadMessageError:
        return
    assert isinstance(payload, bytes) and isinstance(attributes, dict)


@pytest.mark.parametrize(
    ("payload", "want"),
    [
        (b'{"run_id": "r1", "action": "approve"}', ("r1", "approve")),
        (b'{"run_id": "r1"}', ("r1", None)),
        (b"not json", "not JSON"),
        (b"[1]", "not a JSON object"),
        (b"", "needs a string `run_id`"),
        (b'{"run_id": 7}', "needs a string `run_id`"),
        (b'{"run_id": ""}', "needs a string `run_id`"),
    ],
)
def test_kick_messages_decode_or_say_what_is_wrong(payload, want):
    if isinstance(want, tuple):
        assert MAIN.kick_message(payload) == want
        return
    with pytest.raises(MAIN.BadMessageError, match=want):
        MAIN.kick_message(payload)


def _entry(**payload: Any) -> bytes:
    base = {
        "involvedObject": {"kind": "Job", "name": "j"},
        "reason": "Completed",
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }
    return json.dumps({"insertId": "x", "jsonPayload": {**base, **payload}}).encode()


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe not utf-8",
        b"not json",
        b"[1, 2]",
        b'{"jsonPayload": "text"}',
        _entry(involvedObject={"kind": "Pod", "name": "p"}),
        _entry(involvedObject="a string"),
        _entry(involvedObject=["a", "list"]),
        _entry(lastTimestamp="yesterday"),
        b"{" * 100_000,
    ],
    ids=[
        "utf8",
        "json",
        "list",
        "payload-str",
        "pod",
        "obj-str",
        "obj-list",
        "time",
        "deep",
    ],
)
def test_malformed_log_entries_are_bad_events(raw):
    with pytest.raises(BadEventError):
        parse_log_entry(raw)


@settings(max_examples=300, deadline=None)
@given(
    payload=st.dictionaries(
        st.sampled_from(
            ["involvedObject", "lastTimestamp", "metadata", "reason", "type", "message"]
        ),
        JSONISH,
    )
)
def test_fuzzed_log_entries_raise_only_bad_event(payload):
    try:
        parse_log_entry(json.dumps({"insertId": "x", "jsonPayload": payload}).encode())
    except BadEventError:
        pass


def test_oversized_messages_are_refused_without_decoding():
    """A message far beyond any LogEntry (Pub/Sub allows 10 MB) is a bad event, not a parse."""
    huge = json.dumps({"jsonPayload": {"message": "x" * 2_000_000}}).encode()
    with pytest.raises(BadEventError, match="too large"):
        parse_log_entry(huge)
