"""`pipeline apply` on the Firestore emulator: the run's stored config is replaced, its
version bumped, and the history entry (who, when, the diff) kept in
`runs/{run}/config_versions`; a refused change leaves both untouched."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from adapters.google.firestore_store import FirestoreRunStore
from tests.builders.stored_runs import DEMO

# The preflight is test_doctor_local's: examples/demo leaves its watershed to `pipeline demo`.
START = ("start", "-c", str(DEMO), "--no-preflight")


def _edited(tmp_path: Path, name: str, **job: Any) -> str:
    doc = yaml.safe_load(DEMO.read_text())
    doc["job"].update(job)
    shutil.copy(DEMO.parent / doc["dataset"], tmp_path / doc["dataset"])
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_apply_stores_the_version_and_its_history(cli, firestore_project, tmp_path):
    store = FirestoreRunStore(firestore_project)
    assert cli(*START, "--run-id", "r1").exit_code == 0
    ramp = {"start": 2, "factor": 2, "period": 3, "max": 9}
    out = cli("apply", "r1", "-c", _edited(tmp_path, "a.yml", ramp=ramp), "--by", "bob")
    assert out.exit_code == 0, out.output
    assert "config.job.ramp.max: 4 -> 9  [at once (next reconcile)]" in out.output
    run = store.load_run("r1")
    assert run.config_version == 2 and run.config["job"]["ramp"]["max"] == 9
    (entry,) = store.config_versions("r1")
    assert (entry["version"], entry["by"], entry["forced"]) == (2, "bob", False)
    assert entry["changes"] == [
        {"key": "config.job.ramp.max", "old": 4, "new": 9, "when": "at once (next reconcile)"}
    ]
    assert entry["at"] is not None

    seed = cli("apply", "r1", "-c", _edited(tmp_path, "b.yml", ramp=ramp, perm_seed=7))
    assert seed.exit_code == 2 and "config.job.perm_seed 42 -> 7" in seed.output
    assert store.load_run("r1").config["job"]["perm_seed"] == 42
    assert len(store.config_versions("r1")) == 1

    forced = cli("apply", "r1", "-c", _edited(tmp_path, "b.yml", ramp=ramp, perm_seed=7), "--force")
    assert forced.exit_code == 0, forced.output
    assert store.load_run("r1").config["job"]["perm_seed"] == 7
    last = store.config_versions("r1")[-1]
    assert (last["version"], last["by"], last["forced"]) == (3, "alice", True)


def test_apply_says_what_it_does_to_each_running_layer_and_replaces_a_drifted_one(
    cli, firestore_project, tmp_path
):
    """A running layer whose image changed is replaced at once (a new attempt retiring its
    Job, stored with the version); one whose processes changed only is noted, left running."""
    store = FirestoreRunStore(firestore_project)
    assert cli(*START, "--run-id", "r1", "--stages", "ingest,l2cache").exit_code == 0

    def running(run):
        for key, name in (("ingest-L2", "job-i2"), ("l2cache-L2", "job-c2")):
            ls = run.layers[key]
            ls.phase, ls.job.name, ls.job.completions, ls.job.parallelism = "running", name, 4, 2

    store.update_run("r1", running)
    doc = yaml.safe_load(DEMO.read_text())
    doc["images"]["ingest"] = "cave-pipeline/worker:fixed"
    doc["job"]["workloads"] = {"l2cache": {"processes_per_vcpu": 3}}
    shutil.copy(DEMO.parent / doc["dataset"], tmp_path / doc["dataset"])
    (tmp_path / "fix.yml").write_text(yaml.safe_dump(doc))
    out = cli("apply", "r1", "-c", str(tmp_path / "fix.yml"))
    assert out.exit_code == 0, out.output
    lines = out.output.split("running layers:\n", 1)[1].splitlines()
    assert lines[0].startswith(
        "  ingest-L2 (running, job job-i2): replaced at once: image "
        "'cave-pipeline/worker:local' -> 'cave-pipeline/worker:fixed'"
    )
    assert lines[1].startswith(
        "  l2cache-L2 (running, job job-c2): scheduling only, not replaced: "
        "processes_per_vcpu 1 -> 3"
    )
    run = store.load_run("r1")
    ingest, l2cache = run.layers["ingest-L2"], run.layers["l2cache-L2"]
    assert (ingest.phase, ingest.job.attempt, ingest.job.retire_job) == ("waiting", 1, "job-i2")
    assert ingest.job.retire_delete and ingest.approval.granted
    assert (l2cache.phase, l2cache.job.attempt, l2cache.job.name) == ("running", 0, "job-c2")
    (entry,) = store.config_versions("r1")
    assert [(x["layer"], x["action"]) for x in entry["running_layers"]] == [
        ("ingest-L2", "replace"),
        ("l2cache-L2", "note"),
    ]


def test_a_reconcile_commit_records_a_config_version_with_the_state(cli, firestore_project):
    """`job.rightsize: auto`'s version (shared.reconcile.rightsize_version) rides on the reconcile's
    commit: stored with the run's bumped version in the same write, read back as apply's."""
    store = FirestoreRunStore(firestore_project)
    assert cli(*START, "--run-id", "r1").exit_code == 0
    before = store.load_run("r1")
    after = store.load_run("r1")
    after.config_version += 1
    change = {"key": "config.job.workloads.ingest.resources.overrides.3.cpu", "old": 0.25}
    entry = {
        "version": after.config_version,
        "by": "rightsize",
        "at": None,
        "forced": False,
        "changes": [{**change, "new": 0.5, "when": "this layer's Job"}],
        "changes_omitted": 0,
    }
    store.commit(before, after, config_versions=[entry])
    assert store.load_run("r1").config_version == entry["version"]
    (got,) = store.config_versions("r1")
    assert (got["by"], got["version"], got["changes"]) == ("rightsize", 2, entry["changes"])


def _mesh_edited(tmp_path: Path, **mesh: Any) -> str:
    """The demo pair with its dataset's mesh_config changed (both files copied)."""
    doc = yaml.safe_load(DEMO.read_text())
    dataset = yaml.safe_load((DEMO.parent / doc["dataset"]).read_text())
    dataset["mesh_config"].update(mesh)
    (tmp_path / doc["dataset"]).write_text(yaml.safe_dump(dataset))
    path = tmp_path / "mesh.yml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_a_mesh_config_change_after_the_meshing_setup_ran_is_refused(
    cli, firestore_project, tmp_path
):
    store = FirestoreRunStore(firestore_project)
    started = cli(*START, "--run-id", "rm", "--stages", "ingest,meshing")
    assert started.exit_code == 0, started.output
    edited = _mesh_edited(tmp_path, max_layer=3)
    # Before the meshing setup ran: applied, saying when it takes effect.
    before = cli("apply", "rm", "-c", edited)
    assert before.exit_code == 0, before.output
    assert "dataset.mesh_config.max_layer: 4 -> 3  [when the meshing setup runs" in before.output
    assert store.load_run("rm").dataset["mesh_config"]["max_layer"] == 3
    # The setup wrote it into the graph: a further change is refused, forced or not.
    store.update_run("rm", lambda r: setattr(r.setups["meshing"], "phase", "succeeded"))
    again = _mesh_edited(tmp_path, max_layer=2)
    for extra in ((), ("--force",)):
        refused = cli("apply", "rm", "-c", again, *extra)
        assert refused.exit_code == 2, refused.output
        assert "dataset.mesh_config.max_layer 3 -> 2" in refused.output
        assert "re-run the meshing setup" in refused.output and "no effect" in refused.output
    assert store.load_run("rm").dataset["mesh_config"]["max_layer"] == 3
    assert len(store.config_versions("rm")) == 1


def test_a_resubmit_refuses_a_dataset_file_changed_since_the_start_until_applied(
    cli, firestore_project, tmp_path
):
    """The run records its dataset file's fingerprint at `pipeline start`; `pipeline submit`
    refuses once the file changed (the layer would build with the stored dataset), naming the
    key and `pipeline apply`; applied, the new fingerprint is the run's and the re-submit
    goes ahead. A run stored before fingerprints were recorded is not checked."""
    store = FirestoreRunStore(firestore_project)
    doc = yaml.safe_load(DEMO.read_text())
    dataset = tmp_path / doc["dataset"]
    shutil.copy(DEMO.parent / doc["dataset"], dataset)
    shutil.copy(DEMO, tmp_path / "pipeline.yml")
    started = cli("start", "-c", str(tmp_path / "pipeline.yml"), "--no-preflight", "--run-id", "r1")
    assert started.exit_code == 0, started.output
    recorded = store.load_run("r1").config["dataset_fingerprint"]
    assert recorded

    def failed(run):
        ls = run.layers["ingest-L2"]
        ls.phase, ls.job.name, ls.failure_reason = "failed", "job-i2", "BackoffLimitExceeded"

    store.update_run("r1", failed)
    dataset.write_text(dataset.read_text().replace("seed: 7", "seed: 8"))
    refused = cli("submit", "r1", "ingest", "2")
    assert refused.exit_code == 2, refused.output
    assert "dataset.ingest_config.seed 7 -> 8 can take effect: `pipeline apply r1`" in (
        refused.output
    )
    assert store.load_run("r1").layers["ingest-L2"].phase == "failed"
    applied = cli("apply", "r1")
    assert applied.exit_code == 0, applied.output
    run = store.load_run("r1")
    assert run.dataset["ingest_config"]["seed"] == 8
    assert run.config["dataset_fingerprint"] not in ("", recorded)
    again = cli("submit", "r1", "ingest", "2")
    assert again.exit_code == 0, again.output
    # An older run document, without the field: loads, and nothing is compared.
    store.update_run("r1", failed)
    store.update_run("r1", lambda r: r.config.pop("dataset_fingerprint"))
    dataset.write_text(dataset.read_text().replace("seed: 8", "seed: 9"))
    old = cli("submit", "r1", "ingest", "2")
    assert old.exit_code == 0, old.output
