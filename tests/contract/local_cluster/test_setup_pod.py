"""The local cluster runs a setup pass's Job as rendered for GKE: one pod, the mounted
Secret and ConfigMap readable at the paths its env names (remapped into the cluster's folder),
the planned grid in its env."""

from __future__ import annotations

import json
from pathlib import Path

from shared.config.config_files import load_config
from shared.jobs.setup_job import dataset_config_map_manifest, render_setup_job, secret_manifest
from tests.builders.local_jobs import wait_for

ROOT = Path(__file__).resolve().parents[3]
DEMO = load_config(ROOT / "examples" / "demo" / "pipeline.yml")
# Prints what the setup images read: the credential file, the dataset file, the grid.
PROBE = (
    "import json, os, pathlib; "
    "print(json.dumps({'creds': pathlib.Path(os.environ['GOOGLE_APPLICATION_CREDENTIALS'])"
    ".read_text(), 'cave': pathlib.Path(os.environ['GOOGLE_APPLICATION_CREDENTIALS'])"
    ".with_name('cave-secret.json').read_text(), 'dataset': pathlib.Path("
    "os.environ['PCG_DATASET']).read_text(), 'grid': os.environ['PCG_GRID_SHAPE']}))"
)


def test_a_setup_pod_reads_its_mounted_secret_and_dataset(cluster):
    local, _ = cluster
    cfg = DEMO.model_copy(
        update={
            "secret_files": {"google-secret.json": "key.json"},
            "commands": {"ingest_setup": ["python", "-c", PROBE]},
        }
    )
    local.apply_secret(secret_manifest(cfg, {"google-secret.json": b'{"type": "x"}'}))
    local.apply_config_map(dataset_config_map_manifest(cfg, "r1"))
    manifest = render_setup_job(cfg, "ingest", run_id="r1")
    assert local.create_job(manifest)
    name = manifest["metadata"]["name"]
    status = wait_for(lambda: (j := local.get_job(name)) and j.finished and j, what="setup Job")
    assert status.condition == "Complete", local.pod_log(local.list_pods(name)[0].name)
    [pod] = local.list_pods(name)
    seen = json.loads(local.pod_log(pod.name).strip().splitlines()[-1])
    assert seen["creds"] == '{"type": "x"}'
    assert seen["cave"] == '{"token": "placeholder"}'
    assert "CHUNK_SIZE" in seen["dataset"]
    assert seen["grid"] == ",".join(map(str, DEMO.layer2_shape()))
