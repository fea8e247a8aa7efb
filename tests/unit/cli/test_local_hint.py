"""What `pipeline local up` tells the operator once the stack is up, and what `pipeline local
env` exports: commands that work where they are typed. The e2e test of the by-hand section
(tests/e2e/test_by_hand.py) runs the printed commands; these are the other places."""

from __future__ import annotations

import json

from click.testing import CliRunner

from scripts.cli import main
from scripts.commands.local import BY_HAND, cli_env, ready_lines

ENV = {"PIPELINE_PROJECT": "local-demo", "BIGTABLE_EMULATOR_HOST": "127.0.0.1:1"}


def test_in_the_stacks_folder_the_hint_is_the_demo_build_by_hand(tmp_path):
    lines = ready_lines(tmp_path / ".local-stack", tmp_path, cli_env(ENV, ".local-stack"))
    assert f"in this folder ({tmp_path})" in lines[0]
    assert [ln.strip() for ln in lines[1:5]] == list(BY_HAND)
    assert BY_HAND[0].split()[1:3] == ["demo", "data"]  # the data the others need comes first
    assert "  export PIPELINE_PROJECT=local-demo" in lines


def test_with_another_state_dir_the_hint_says_how_to_reach_it(tmp_path):
    lines = ready_lines(tmp_path / "st", tmp_path, cli_env(ENV, tmp_path / "st"))
    assert f'eval "$(pipeline local env --state-dir {tmp_path / "st"})"' in lines[0]


def test_local_env_exports_the_clusters_kubeconfig_too(tmp_path):
    """Elsewhere, the commands that read the cluster or write the pods' Secret need it: the
    operators' kubeconfig and the stack's namespace."""
    state = tmp_path / "st"
    state.mkdir()
    doc = {"env": ENV, "kubeconfig": str(state / "op.kubeconfig"), "namespace": "cave-pipeline"}
    (state / "stack.json").write_text(json.dumps(doc))
    out = CliRunner().invoke(main, ["local", "env", "--state-dir", str(state)])
    assert out.exit_code == 0, out.output
    assert f"export KUBECONFIG={state / 'op.kubeconfig'}" in out.output
    assert "export PIPELINE_NAMESPACE=cave-pipeline" in out.output
    assert "export PIPELINE_PROJECT=local-demo" in out.output
