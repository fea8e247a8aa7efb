"""`pipeline doctor` against hand-written projects: the REST adapter (adapters/doctor) reads
answers written by hand in Google's and Kubernetes' published JSON shapes
(tests/fixtures/doctor/*.json; the Google ones validated against their discovery documents by
tests/unit/test_fixture_shapes.py) through an injected session. A healthy project passes
every check; a broken one fails every check, each with its fix; denied reads, refused
credentials, no network and a hung call are told apart; and the CLI without credentials exits
3 naming the login, without a traceback."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from adapters.common.rest import RestApi
from adapters.doctor.cloud import CloudFacts
from adapters.doctor.runner import run_checks
from scripts.cli import main
from scripts.commands.doctor import Diagnosis, render
from shared.config.config_files import load_config
from shared.doctor.checks import CHECKS, select
from shared.doctor.deployment import deployment_of
from shared.doctor.verdicts import Verdict
from tests.builders.fixture_http import CONFIG, FixtureSession, doctor_routes

# The broken project's graph table holds metadata of another grid (4x4x2, 4 layers).
OTHER_GRID = {
    "kind": "cave-pipeline/graph-meta",
    "bounds_lo": [0, 0, 0],
    "bounds_hi": [1024, 1024, 1024],
    "chunk_size": [256, 256, 512],
    "layer_count": 4,
}
HUB = "hub.docker.com"


@pytest.fixture(scope="module")
def cfg():
    return load_config(CONFIG)


def diagnose(cfg, routes, meta=None, public_routes=None, **session_args) -> tuple:
    dep = deployment_of(cfg)
    session = FixtureSession(routes, **session_args)
    public = FixtureSession(public_routes if public_routes is not None else routes)
    facts = CloudFacts(cfg, dep, RestApi(session), RestApi(public), "ana@lab.org", lambda: meta)
    results = run_checks(list(CHECKS), facts.fetchers(), dep)
    return Diagnosis("cloud", dep.project, results), session, public


def test_a_healthy_project_passes_every_check(cfg):
    diagnosis, session, public = diagnose(cfg, doctor_routes("healthy"))
    failing = [(r.check, r.verdict, r.detail) for r in diagnosis.results if r.verdict != "pass"]
    assert failing == []
    assert diagnosis.exit_code == 0
    assert len(diagnosis.results) == len(CHECKS)
    # The Google token goes to Google only: Docker Hub is asked through the plain session.
    assert not [u for u in session.asked if HUB in u]
    assert [u for u in public.asked if HUB in u]


# check -> what its detail says about the broken project, and what its fix says to do
BROKEN = {
    "apis": ("container.googleapis.com, cloudscheduler", "gcloud services enable"),
    "firestore": ("DATASTORE_MODE", "cannot change mode"),
    "pubsub": ("missing: dead-letters, dead-letters-trigger", "terraform apply"),
    "log-sink": ("no log sink cave-pipeline-job-events", "terraform apply"),
    "scheduler": ("PAUSED", "gcloud scheduler jobs resume cave-pipeline-tick"),
    "functions": ("missing in us-east1: on-kick", "terraform apply"),
    "bigtable-instance": ("no Bigtable instance lab-proj/pcg", "gcloud bigtable instances"),
    "graph-table": ("vs [8, 8, 2] planned", "deletetable fly_v31"),
    "service-accounts": ("missing: cave-pipeline-invoker@", "terraform apply"),
    "grants": ("no pod account holds roles/bigtable.admin", "terraform apply"),
    "operator": ("lacking datastore.entities.create", "operator_members"),
    "workload-identity": ("[pipeline/pipeline-worker] may not act", "workloadIdentityUser"),
    "cluster": ("v1.28.15", "clusters upgrade"),
    "namespace": ("no namespace pipeline", "pipeline_kubernetes_manifest | kubectl apply"),
    "rbac": ("you may not get jobs.batch", "pipeline_kubernetes_manifest"),
    "images": ("caveconnectome/pychunkedgraph:v3.2.0 (no such tag)", "push the image"),
    "spot-quota": ("24 free of 32", "PREEMPTIBLE_CPUS quota"),
    "data-paths": ("access denied (HTTP 403)", "read access"),
}


def test_a_broken_project_fails_every_check_with_its_fix(cfg):
    diagnosis, _, _ = diagnose(cfg, doctor_routes("broken"), meta=OTHER_GRID)
    assert set(BROKEN) == {c.id for c in CHECKS}
    for r in diagnosis.results:
        detail, fix = BROKEN[r.check]
        assert r.verdict is Verdict.FAIL, (r.check, r.detail)
        assert detail in r.detail, (r.check, r.detail)
        assert fix in r.fix, (r.check, r.fix)
    assert diagnosis.exit_code == 1
    text = render(diagnosis)
    assert text.count("fix: ") == len(CHECKS) and "18 fail (exit 1)" in text


def test_the_grants_check_names_each_missing_grant(cfg):
    diagnosis, _, _ = diagnose(cfg, doctor_routes("broken"), meta=OTHER_GRID)
    grants = next(r for r in diagnosis.results if r.check == "grants").detail
    for missing in (
        "cave-pipeline-controller@lab-proj.iam.gserviceaccount.com lacks roles/datastore.user",
        "cave-pipeline-nodes@lab-proj.iam.gserviceaccount.com lacks "
        "roles/container.defaultNodeServiceAccount",
        "may not publish alerts",
        "may not publish kicks",
        "cave-pipeline-worker@lab-proj.iam.gserviceaccount.com has no Bigtable role on pcg",
        "cannot read gs://lab-data",
    ):
        assert missing in grants


FUNCTIONS = "https://cloudfunctions.googleapis.com/v2/projects/lab-proj/locations/us-east1"


def test_a_denied_read_fails_naming_the_call_and_the_role(cfg):
    denied = {
        "status": 403,
        "body": {
            "error": {
                "code": 403,
                "message": "Permission 'cloudfunctions.functions.get' denied on 'projects/"
                "lab-proj/locations/us-east1/functions/on-tick'",
                "status": "PERMISSION_DENIED",
            }
        },
    }
    routes = doctor_routes("healthy", **{f"GET {FUNCTIONS}/functions/on-tick": denied})
    diagnosis, _, _ = diagnose(cfg, routes)
    fn = next(r for r in diagnosis.results if r.check == "functions")
    assert fn.verdict is Verdict.FAIL
    assert "functions/on-tick: permission denied" in fn.detail
    assert "cloudfunctions.viewer" in fn.fix
    assert diagnosis.exit_code == 1


def test_refused_credentials_are_unreachable_and_name_the_login(cfg):
    refused = {
        "status": 401,
        "body": {
            "error": {
                "code": 401,
                "message": "Request had invalid authentication credentials.",
                "status": "UNAUTHENTICATED",
            }
        },
    }
    routes = {k: refused for k in doctor_routes("healthy")}
    diagnosis, _, _ = diagnose(cfg, routes)
    lost = [r for r in diagnosis.results if r.verdict is Verdict.UNREACHABLE]
    assert lost and diagnosis.exit_code == 3
    assert "gcloud auth application-default login" in lost[0].detail


def test_no_network_makes_every_check_unreachable(cfg):
    diagnosis, _, _ = diagnose(
        cfg, doctor_routes("healthy"), fail_with=ConnectionError("Name or service not known")
    )
    # Docker Hub's session still answers: only the images check may conclude.
    verdicts = {r.check: r.verdict for r in diagnosis.results}
    assert verdicts["apis"] is Verdict.UNREACHABLE and verdicts["data-paths"] is Verdict.UNREACHABLE
    assert diagnosis.exit_code == 3


def test_a_hung_call_is_reported_unreachable_not_waited_for(cfg):
    release = threading.Event()
    dep = deployment_of(cfg)
    fetchers = {"apis": lambda: release.wait(30) and {}, "firestore": lambda: {"database": None}}
    try:
        results = run_checks(select(["apis", "firestore"]), fetchers, dep, deadline_s=0.2)
    finally:
        release.set()
    assert [r.verdict for r in results] == [Verdict.UNREACHABLE, Verdict.FAIL]
    assert "no answer within" in results[0].detail


def test_json_carries_every_check(cfg):
    diagnosis, _, _ = diagnose(cfg, doctor_routes("broken"), meta=OTHER_GRID)
    doc = json.loads(json.dumps(diagnosis.to_json()))
    assert doc["exit_code"] == 1 and len(doc["checks"]) == len(CHECKS)
    assert {c["verdict"] for c in doc["checks"]} == {"fail"}
    assert all(c["fix"] for c in doc["checks"])


def _no_google_env(tmp_path: Path) -> dict[str, str | None]:
    return {
        "GOOGLE_APPLICATION_CREDENTIALS": None,
        "CLOUDSDK_CONFIG": str(tmp_path),  # no gcloud login there
        "NO_GCE_CHECK": "True",  # not on a Google VM: do not wait for a metadata server
        "PIPELINE_PROJECT": None,
        "FIRESTORE_EMULATOR_HOST": None,
        "PUBSUB_EMULATOR_HOST": None,
        "BIGTABLE_EMULATOR_HOST": None,
    }


def test_cli_without_credentials_exits_3_naming_the_login(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no local stack here
    result = CliRunner().invoke(
        main, ["doctor", "-c", str(CONFIG), "--json"], env=_no_google_env(tmp_path)
    )
    assert result.exit_code == 3, result.output
    assert "gcloud auth application-default login" in result.output
    assert "Traceback" not in result.output
    doc = json.loads(result.stdout)
    assert doc["exit_code"] == 3 and len(doc["checks"]) == len(CHECKS)
    assert {c["verdict"] for c in doc["checks"]} == {"unreachable"}


def test_cli_without_network_exits_3_naming_the_login(tmp_path, monkeypatch):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    key_file = tmp_path / "key.json"
    key_file.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "lab-proj",
                "private_key_id": "0",
                "private_key": pem,
                "client_email": "ci@lab-proj.iam.gserviceaccount.com",
                "client_id": "1",
                # a closed loopback port: the token request fails as without a network
                "token_uri": "https://127.0.0.1:9/token",
            }
        )
    )
    monkeypatch.chdir(tmp_path)
    env = {**_no_google_env(tmp_path), "GOOGLE_APPLICATION_CREDENTIALS": str(key_file)}
    result = CliRunner().invoke(main, ["doctor", "-c", str(CONFIG)], env=env)
    assert result.exit_code == 3, result.output
    assert "cannot get a Google access token" in result.output
    assert "gcloud auth application-default login" in result.output
    assert "Traceback" not in result.output


def test_a_trigger_without_its_dead_letter_policy_fails(cfg):
    key = "GET https://pubsub.googleapis.com/v1/projects/lab-proj/subscriptions/ticks-trigger"
    routes = doctor_routes("healthy")
    answer = json.loads(json.dumps(routes[key]))
    del answer["body"]["deadLetterPolicy"]
    diagnosis, _, _ = diagnose(cfg, doctor_routes("healthy", **{key: answer}))
    pubsub = next(r for r in diagnosis.results if r.check == "pubsub")
    assert pubsub.verdict is Verdict.FAIL
    assert "ticks-trigger has no dead-letter policy to dead-letters" in pubsub.detail


def test_local_data_paths_are_looked_for_beside_the_dataset_file(tmp_path):
    from adapters.doctor.cloud import local_path_facts
    from shared.doctor.needs import data_paths

    (tmp_path / "volume.npy").write_bytes(b"")
    (tmp_path / "dataset.yml").write_text(
        "data_source: {size: [64, 64, 64], watershed: volume.npy, edges: file://./edges}\n"
        "graph_config: {CHUNK_SIZE: [32, 32, 32]}\n"
    )
    (tmp_path / "pipeline.yml").write_text(
        "graph_id: g\ndataset: dataset.yml\nbigtable: {project: p, instance: i}\n"
    )
    cfg = load_config(tmp_path / "pipeline.yml")
    found = {p.key: local_path_facts(cfg, p) for p in data_paths(cfg)}
    assert found["data_source.watershed"]["readable"] is True
    assert found["data_source.edges"]["readable"] is False
    assert str(tmp_path / "edges") in found["data_source.edges"]["why"]


def _preflight_with(*verdicts: Verdict):
    from scripts.commands.doctor import preflight
    from shared.doctor.verdicts import CheckResult, PreflightFailedError

    results = [CheckResult(f"c{i}", f"check {i}", v, "found", "do") for i, v in enumerate(verdicts)]

    def run(cfg, checks):  # noqa: ANN001, ANN202 - diagnose's signature
        return Diagnosis("cloud", "p", results)

    try:
        preflight(None, run)  # type: ignore[arg-type]
    except PreflightFailedError as e:  # exit 2 (scripts/exits.py)
        return str(e)
    return None


def test_start_preflight_refuses_a_failure_and_goes_on_past_warnings_and_silence(capsys):
    assert "--no-preflight" in _preflight_with(Verdict.PASS, Verdict.FAIL)
    assert _preflight_with(Verdict.PASS, Verdict.WARN, Verdict.UNREACHABLE) is None
    err = capsys.readouterr().err
    assert "preflight warn: check 1: found" in err and "check 2 not checked" in err


def test_the_controllers_node_events_grant_in_default_is_checked(cfg, monkeypatch):
    """The controller lists the Nodes' OOMKilling events in `default`
    (shared.reconcile.node_oom): a deployment whose manifest predates that Role is told to
    apply it again."""
    asked: list[dict] = []
    review = CloudFacts._review

    def denied_in_default(self, endpoint, kind, attrs, user=""):
        asked.append(attrs)
        answer = review(self, endpoint, kind, attrs, user)
        if kind == "SubjectAccessReview" and attrs["namespace"] == "default":
            return {**answer, "status": {"allowed": False}}
        return answer

    monkeypatch.setattr(CloudFacts, "_review", denied_in_default)
    diagnosis, _, _ = diagnose(cfg, doctor_routes("healthy"))
    [rbac] = [r for r in diagnosis.results if r.check == "rbac"]
    assert rbac.verdict == "fail"
    assert "may not list events in namespace default" in rbac.detail
    assert {"namespace": "default", "verb": "list", "group": "", "resource": "events"} in asked
