"""What `pipeline purge` and `undeploy` tell the operator to do with the Jobs the pipeline no
longer tracks: what works where the CLI reads the cluster (the purge itself is exercised on
the emulators in tests/contract/test_cli_ops.py)."""

from __future__ import annotations

from scripts.cluster_access import LOCAL_DIR_ENV
from scripts.commands.admin import remove_jobs_hint


def test_on_gke_kubectl_deletes_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no local stack here
    monkeypatch.delenv(LOCAL_DIR_ENV, raising=False)
    hint = remove_jobs_hint(["j1", "j2"], "pcg")
    assert hint == "if still there: kubectl delete job -n pcg j1 j2"


def test_on_the_local_stack_stopping_it_ends_them(tmp_path, monkeypatch):
    """kubectl cannot reach the local cluster: the hint names what does."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cluster" / "jobs").mkdir(parents=True)
    monkeypatch.setenv(LOCAL_DIR_ENV, str(tmp_path / "cluster"))
    hint = remove_jobs_hint(["j1"], "pcg")
    assert "kubectl" not in hint
    assert hint == (
        "on the local stack they stop when `pipeline local up` stops (Ctrl-C in its terminal "
        "ends every pod of its cluster): j1"
    )
