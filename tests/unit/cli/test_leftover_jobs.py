"""What `pipeline purge` and `undeploy` tell the operator to do with the Jobs the pipeline no
longer tracks: what works where the CLI reads the cluster (the purge itself is exercised on
the emulators in tests/contract/test_cli_ops.py)."""

from __future__ import annotations

import json

from scripts.commands.admin import remove_jobs_hint


def test_on_gke_kubectl_deletes_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no local stack here
    hint = remove_jobs_hint(["j1", "j2"], "pcg")
    assert hint == "if still there: kubectl delete job -n pcg j1 j2"


def test_on_the_local_stack_kubectl_deletes_them_as_the_stacks_admin(tmp_path, monkeypatch):
    """The operators' Role may not delete Jobs (as on GKE): the hint names the stack's admin
    kubeconfig and its namespace."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".local-stack").mkdir()
    doc = {
        "env": {},
        "kubeconfig": "/s/operator.kubeconfig",
        "admin_kubeconfig": "/s/kubeconfig",
        "namespace": "cave-pipeline",
    }
    (tmp_path / ".local-stack" / "stack.json").write_text(json.dumps(doc))
    hint = remove_jobs_hint(["j1"], "pcg")
    assert hint == "if still there: KUBECONFIG=/s/kubeconfig kubectl delete job -n cave-pipeline j1"
