"""Local Kubernetes runs a setup pass's Job as rendered for GKE: one pod (its service account,
scheduling and volumes as rendered), the mounted Secret and ConfigMap readable at the paths its
env names (the process kubelet remaps them into the pod's folder), the planned grid in its
env."""

from __future__ import annotations

import json
from pathlib import Path

from adapters.gke.cluster import GkeCluster
from shared.config.config_files import load_config
from shared.jobs.setup_job import dataset_config_map_manifest, render_setup_job, secret_manifest
from tests.builders.kube_cluster import KubeCluster, unique
from tests.builders.local_jobs import settled

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


def test_a_setup_pod_reads_its_mounted_secret_and_dataset(kube_cluster: KubeCluster) -> None:
    c, run_id = kube_cluster, unique("r")
    cfg = DEMO.model_copy(
        update={
            "namespace": c.kube.namespace,
            "secret_files": {"google-secret.json": "key.json"},
            "commands": {"ingest_setup": ["python", "-c", PROBE]},
        }
    )
    # `pipeline setup` writes the Secret as the operator (terraform's Roles: the controller
    # may not), the controller the rest.
    operator = GkeCluster.from_kubeconfig(
        namespace=c.kube.namespace, config_file=str(c.kube.operator_kubeconfig)
    )
    operator.apply_secret(secret_manifest(cfg, {"google-secret.json": b'{"type": "x"}'}))
    c.apply_config_map(dataset_config_map_manifest(cfg, run_id))
    manifest = render_setup_job(cfg, "ingest", run_id=run_id)
    assert c.create_job(manifest)
    name = manifest["metadata"]["name"]
    status = settled(c, name)
    [pod] = c.list_pods(name)
    assert status.condition == "Complete", c.pod_log(pod.name)
    seen = json.loads(c.pod_log(pod.name).strip().splitlines()[-1])
    assert seen["creds"] == '{"type": "x"}'
    assert seen["cave"] == '{"token": "placeholder"}'
    assert "CHUNK_SIZE" in seen["dataset"]
    assert seen["grid"] == ",".join(map(str, DEMO.layer2_shape()))
