"""What one Spot preemption of a PyChunkedGraph image's layer-2 ingest pod costs on the local
stack: the pods by outcome, the Job's failed count, the retries of the preempted index burnt,
the held-chunk wait the retry pod used, wall time (issue 26, "A preemption burns a retry").

It runs the by-hand flow of tests/e2e/test_by_hand_pcg.py as an operator would, each command
its own process of the tree under test (`python -m scripts.cli` with PYTHONPATH = that tree):
`pipeline local up --tick 2`, `pipeline demo data`, the demo config turned into a lab's image
config (the layer pods run the predecessor's published harness in the Python 3.12 venv of
tests/builders/pcg_harness.py, with the image stand-ins tests/builders/pcg_ingest.py and
tests/builders/pcg_image_lock.py), `pipeline setup`, `pipeline start --advance approve`,
`pipeline approve`. The pods' entry point is pcg_ingest's, with every chunk's computation
taking `--chunk-s` seconds more (a real chunk takes minutes; the demo's takes milliseconds),
so the kill lands while a claim is live.

Once a layer-2 pod has begun a chunk it is preempted through the Eviction API, as GKE reclaims
a Spot VM: DisruptionTarget on the pod (so the Job's pod-failure policy ignores that failure),
SIGTERM, which the image's harness has no handler for, so the process dies at once and the
chunk's claim stays live for the claim lifetime (ROOT_LOCK_EXPIRY, 3 minutes). The index's
next pod meets that claim and waits PCG_HELD_MAX_WAIT_SEC (the image's default 120 s when the
pod's env does not set it) polling every PCG_LOCK_POLL_SEC.

    python bench/bench_image_preemption.py                       # this tree
    python bench/bench_image_preemption.py --tree /work/wt-held-before

Prints one JSON document and a short table. Figures, not assertions. Needs the gcloud
emulators, the control plane binaries (CAVE_CONTROLPLANE_DIR) and the harness venv.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from adapters.common.termination import run_script  # noqa: E402
from adapters.local.kube_api import KubeApi  # noqa: E402
from tests.builders.pcg_harness import harness_python  # noqa: E402

RUN_ID = "r1"
IMAGE_HELD_WAIT_S = 120  # the image's own default when PCG_HELD_MAX_WAIT_SEC is unset
# pcg_ingest's entry point with a slower chunk: each chunk logs that it began (inside its
# claim: process_chunk runs under process_under_claim) and takes CHUNK_S seconds more.
ENTRY = """\
import json, sys, time
sys.stdout.reconfigure(line_buffering=True)
import demo.ingest
from tests.builders import pcg_ingest
_compute = demo.ingest.process_chunk
def _slow(ctx):
    print(json.dumps({{"bench_chunk_begun": [ctx.layer, list(ctx.coord)]}}), flush=True)
    time.sleep({chunk_s})
    _compute(ctx)
demo.ingest.process_chunk = _slow
from cave_pipeline.distribution import run_and_exit
run_and_exit(pcg_ingest.main)
"""
INDEX_ANN = "batch.kubernetes.io/job-completion-index"
FAILURES_ANN = "batch.kubernetes.io/job-index-failure-count"
IGNORED_ANN = "batch.kubernetes.io/job-index-ignored-failure-count"


class BenchError(RuntimeError):
    """A step of the flow failed; the message names it and carries its output."""


@dataclass
class Seen:
    """What was seen of the layer's pods and Job while they existed (the controller may
    delete finished Jobs before the run's end)."""

    pods: dict[str, dict[str, Any]] = field(default_factory=dict)  # by uid, newest view
    logs: dict[str, str] = field(default_factory=dict)  # by pod name
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)  # by name, newest view


CONTROLPLANE_DIRS: dict[Path, str] = {}  # a tree's CAVE_CONTROLPLANE_DIR when not the caller's


def cli_env(tree: Path) -> dict[str, str]:
    """The operator's environment for the tree's CLI (no emulator hosts: the CLI finds the
    stack through .local-stack/stack.json)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIPELINE_")}
    env = {k: v for k, v in env.items() if "EMULATOR_HOST" not in k}
    if tree in CONTROLPLANE_DIRS:
        env["CAVE_CONTROLPLANE_DIR"] = CONTROLPLANE_DIRS[tree]
    return {**env, "PYTHONPATH": str(tree)}


def _binary_of(tree: Path, env: dict[str, str]) -> Path:
    """Where `tree` looks for its control plane binary under `env`."""
    code = "from adapters.local.controlplane.build import binary_path; print(binary_path())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tree,
        env={**env, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def share_controlplane(tree: Path, work: Path) -> str | None:
    """Let an older tree run this tree's control plane binary when it has none built and
    both are the same Kubernetes version (a cold build takes half an hour on 2 cores; the
    binary is upstream's commands, the newer one adds metrics-server): a CAVE_CONTROLPLANE_DIR
    in `work` whose entry for the tree's key links to this tree's binary. The note, or None."""
    env = cli_env(tree)
    theirs, ours = _binary_of(tree, env), _binary_of(REPO, env)
    same_version = theirs.parent.name.split("-")[0] == ours.parent.name.split("-")[0]
    if theirs.exists() or not ours.exists() or not same_version:
        return None
    linked = work / "controlplane" / theirs.parent.name / theirs.name
    linked.parent.mkdir(parents=True, exist_ok=True)
    linked.symlink_to(ours)
    CONTROLPLANE_DIRS[tree] = str(work / "controlplane")
    return f"{tree} has no control plane binary built ({theirs}): it runs {ours}"


def pipeline(tree: Path, cwd: Path, *args: str, timeout: float = 180) -> str:
    """`pipeline ARGS` of `tree` in `cwd`; its stdout, or BenchError with its output."""
    done = subprocess.run(
        [sys.executable, "-m", "scripts.cli", *args],
        cwd=cwd,
        env=cli_env(tree),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise BenchError(
            f"pipeline {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    return done.stdout


def as_a_labs_image(tree: Path, cfg_path: Path, pcg_python: str, chunk_s: float) -> None:
    """tests/e2e/test_by_hand_pcg.py's as_a_labs_image, with the slower chunk's entry."""
    raw = yaml.safe_load(cfg_path.read_text())
    raw["commands"] = {"ingest": [pcg_python, "-c", ENTRY.format(chunk_s=chunk_s)]}
    raw["workloads"] = {k: v for k, v in raw["workloads"].items() if k != "ingest"}
    image = tree / "tests" / "builders" / "pcg_image"
    raw["env"] = {"PYTHONPATH": f"{tree}{os.pathsep}{image}"}
    cfg_path.write_text(yaml.safe_dump(raw, sort_keys=False))
    ds_path = cfg_path.parent / raw["dataset"]
    ds = yaml.safe_load(ds_path.read_text())
    ds["backend_client"] = {"TYPE": "bigtable", "CONFIG": {"ADMIN": True, "READ_ONLY": False}}
    ds_path.write_text(yaml.safe_dump(ds, sort_keys=False))


def status(tree: Path, cwd: Path) -> dict[str, Any]:
    return json.loads(pipeline(tree, cwd, "status", RUN_ID, "--json"))


def start_stack(tree: Path, cwd: Path) -> subprocess.Popen:
    """`pipeline local up --tick 2` in the background, once its stack.json is written."""
    log = (cwd / "local-up.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "scripts.cli", "local", "up", "--tick", "2"],
        cwd=cwd,
        env=cli_env(tree),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while not (cwd / ".local-stack" / "stack.json").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_stack(proc)
            raise BenchError(f"local up did not start:\n{(cwd / 'local-up.log').read_text()}")
        time.sleep(0.5)
    return proc


def stop_stack(proc: subprocess.Popen) -> None:
    """SIGTERM to `local up` (it stops what it started), SIGKILL to its group after 90 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def layer2_job(name: str) -> bool:
    """An ingest layer-2 Job's name (`<graph>-ingest-l2-...`)."""
    return re.search(r"ingest-l2(\b|-|$)", name) is not None


def observe(api: KubeApi, ns: str, pods_dir: Path, seen: Seen) -> None:
    """One look at the layer-2 Jobs and their pods and logs, kept in `seen`."""
    for job in api.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs").get("items") or []:
        if layer2_job(job["metadata"]["name"]):
            seen.jobs[job["metadata"]["name"]] = job
    for pod in api.request("GET", f"/api/v1/namespaces/{ns}/pods").get("items") or []:
        job_name = pod["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name", "")
        if not layer2_job(job_name):
            continue
        seen.pods[pod["metadata"]["uid"]] = pod
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        log = pods_dir / f"{ns}_{name}_{uid}" / "container.log"
        if log.exists():
            seen.logs[name] = log.read_text(errors="replace")


def began_a_chunk(pod: dict[str, Any], seen: Seen) -> bool:
    """The pod runs and its log says a chunk began (its claim is live)."""
    name = pod["metadata"]["name"]
    return (
        pod["status"].get("phase") == "Running"
        and pod["metadata"].get("deletionTimestamp") is None
        and '"bench_chunk_begun": [2,' in seen.logs.get(name, "")
    )


def evict(api: KubeApi, ns: str, name: str) -> None:
    """A Spot reclaim through the Eviction API (DisruptionTarget, then SIGTERM)."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": ns},
    }
    api.request("POST", f"/api/v1/namespaces/{ns}/pods/{name}/eviction", body)


def outcome(pod: dict[str, Any]) -> str:
    """succeeded / preempted (failed with DisruptionTarget) / failed / running."""
    phase = pod["status"].get("phase")
    if phase == "Succeeded":
        return "succeeded"
    conditions = pod["status"].get("conditions") or []
    if any(c["type"] == "DisruptionTarget" and c["status"] == "True" for c in conditions):
        return "preempted"  # Kubernetes writes it before the pod ends
    return "failed" if phase == "Failed" else "running"


def exit_code(pod: dict[str, Any]) -> int | None:
    for cs in pod["status"].get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get(
            "terminated"
        )
        if term:
            return term.get("exitCode")
    return None


def env_of(pod: dict[str, Any], key: str) -> str | None:
    for c in pod["spec"]["containers"]:
        for e in c.get("env") or []:
            if e["name"] == key:
                return e.get("value")
    return None


def log_lines(text: str) -> list[tuple[datetime, str]]:
    """(kubelet time, line) of a CRI log (`<time> <stream> <tag> <line>`)."""
    out = []
    for raw in text.splitlines():
        parts = raw.split(" ", 3)
        if len(parts) == 4:
            out.append((datetime.fromisoformat(parts[0].replace("Z", "+00:00")), parts[3]))
    return out


def held_wait(text: str, coord: list[int] | None) -> dict[str, Any]:
    """The retry pod's wait on the preempted chunk: from its previous line to the chunk's
    first own line (it began, or gave up: pcg_chunk), as the image polls the claim in
    between; and the chunk's outcome."""
    prev, waited = None, None
    for at, line in log_lines(text):
        rec = json.loads(line) if line.startswith("{") and line.endswith("}") else {}
        mine = rec.get("layer") == 2 and rec.get("pcg_chunk") == coord
        if rec.get("bench_chunk_begun") == [2, coord] or mine:
            if waited is None and prev is not None:
                waited = round((at - prev).total_seconds(), 1)
            if mine:
                return {"outcome": rec["outcome"], "waited_s": waited}
        prev = at
    return {"outcome": None, "waited_s": waited}


def in_flight(text: str) -> list[int] | None:
    """The layer-2 chunk a pod had begun and not finished when it died (its live claim)."""
    begun, finished = [], []
    for _, line in log_lines(text):
        rec = json.loads(line) if line.startswith("{") and line.endswith("}") else {}
        if (rec.get("bench_chunk_begun") or [None])[0] == 2:
            begun.append(rec["bench_chunk_begun"][1])
        if "pcg_chunk" in rec and rec.get("layer") == 2:
            finished.append(rec["pcg_chunk"])
    left = [c for c in begun if c not in finished]
    return left[-1] if left else None


def report(
    seen: Seen,
    victim: dict[str, Any],
    coord: list[int] | None,
    wall_s: float,
    run_status: str,
    tree: Path,
) -> dict[str, Any]:
    """The figures from what was seen."""
    pods = sorted(seen.pods.values(), key=lambda p: p["metadata"]["creationTimestamp"])
    by_outcome: dict[str, int] = {}
    for p in pods:
        by_outcome[outcome(p)] = by_outcome.get(outcome(p), 0) + 1
    index = victim["metadata"]["annotations"][INDEX_ANN]
    of_index = [p for p in pods if p["metadata"]["annotations"].get(INDEX_ANN) == index]
    attempts = []
    for p in of_index:
        ann = p["metadata"]["annotations"]
        wait_env = env_of(p, "PCG_HELD_MAX_WAIT_SEC")
        attempts.append(
            {
                "pod": p["metadata"]["name"],
                "outcome": outcome(p),
                "exit_code": exit_code(p),
                "index_failure_count": int(ann.get(FAILURES_ANN, 0)),
                "index_ignored_failure_count": int(ann.get(IGNORED_ANN, 0)),
                "PCG_HELD_MAX_WAIT_SEC": wait_env,
                "held_wait_s": float(wait_env) if wait_env else IMAGE_HELD_WAIT_S,
                "preempted_chunk": (
                    {"outcome": "in flight at the kill", "waited_s": None}
                    if p["metadata"]["uid"] == victim["metadata"]["uid"]
                    else held_wait(seen.logs.get(p["metadata"]["name"], ""), coord)
                ),
            }
        )
    counted = sum(1 for a in attempts if a["outcome"] == "failed")
    jobs = {
        name: {
            "failed": j["status"].get("failed", 0),
            "succeeded": j["status"].get("succeeded", 0),
            "failedIndexes": j["status"].get("failedIndexes"),
            "backoffLimitPerIndex": j["spec"].get("backoffLimitPerIndex"),
        }
        for name, j in seen.jobs.items()
    }
    retries = [a for a in attempts if a["pod"] != victim["metadata"]["name"]]
    return {
        "tree": str(tree),
        "commit": subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip(),
        "run_status": run_status,
        "layer2_pods": by_outcome,
        "layer2_jobs": jobs,
        "preempted": {"pod": victim["metadata"]["name"], "index": int(index), "chunk": coord},
        "retries_burnt": counted,
        "attempts_of_index": attempts,
        "retry_held_wait_s": retries[0]["held_wait_s"] if retries else None,
        "wall_s": round(wall_s, 1),
    }


def table(doc: dict[str, Any]) -> str:
    rows = [
        ("tree", f"{doc['tree']} ({doc['commit']})"),
        ("run", doc["run_status"]),
        ("layer-2 pods", ", ".join(f"{k} {v}" for k, v in sorted(doc["layer2_pods"].items()))),
        ("Job failed", ", ".join(f"{j['failed']}" for j in doc["layer2_jobs"].values())),
        ("index", f"{doc['preempted']['index']} (chunk {doc['preempted']['chunk']})"),
        ("retries burnt", str(doc["retries_burnt"])),
        ("retry held wait", f"{doc['retry_held_wait_s']} s"),
    ]
    for a in doc["attempts_of_index"]:
        pc = a["preempted_chunk"]
        rows.append(
            (
                f"  {a['pod']}",
                f"{a['outcome']} exit {a['exit_code']}, chunk {pc['outcome']} "
                f"after {pc['waited_s']} s, index failures {a['index_failure_count']}",
            )
        )
    rows.append(("wall", f"{doc['wall_s']} s"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def bench(tree: Path, work: Path, size: int, chunk: int, chunk_s: float) -> dict[str, Any]:
    """The flow with one preemption; the figures."""
    pcg_python = str(harness_python())
    note = share_controlplane(tree, work) if tree != REPO else None
    if note:
        print(note, file=sys.stderr)
    stack = start_stack(tree, work)
    try:
        started = time.monotonic()
        found = json.loads((work / ".local-stack" / "stack.json").read_text())
        api, ns = KubeApi.from_kubeconfig(Path(found["admin_kubeconfig"])), found["namespace"]
        pods_dir = work / ".local-stack" / "kubernetes" / "kubelet" / "pods"
        pipeline(tree, work, "demo", "data", "lab", "--size", str(size), "--chunk", str(chunk))
        as_a_labs_image(tree, work / "lab" / "pipeline.yml", pcg_python, chunk_s)
        cfg = "lab/pipeline.yml"
        pipeline(tree, work, "setup", "-c", cfg)
        pipeline(tree, work, "start", "-c", cfg, "--run-id", RUN_ID, "--advance", "approve")
        deadline = time.monotonic() + 300
        while not (waits := status(tree, work)["layers"][0]["waits_on"]).startswith("approval"):
            if time.monotonic() > deadline or "setup (failed" in waits:
                raise BenchError(f"no approval wait in 300 s: {status(tree, work)}")
            time.sleep(1)
        pipeline(tree, work, "approve", RUN_ID, "ingest")
        seen, victim = Seen(), None
        deadline = time.monotonic() + 300
        while victim is None:
            observe(api, ns, pods_dir, seen)
            victim = next((p for p in seen.pods.values() if began_a_chunk(p, seen)), None)
            if time.monotonic() > deadline:
                raise BenchError("no layer-2 pod began a chunk in 300 s")
            time.sleep(0.2)
        evict(api, ns, victim["metadata"]["name"])
        print(f"preempted {victim['metadata']['name']}", file=sys.stderr)
        # The evicted pod is deleted once it ended: look often until its terminal view is seen.
        uid, until = victim["metadata"]["uid"], time.monotonic() + 30
        while time.monotonic() < until and seen.pods[uid]["status"].get("phase") == "Running":
            observe(api, ns, pods_dir, seen)
            time.sleep(0.2)
        deadline = time.monotonic() + 1200
        while (run := status(tree, work))["status"] == "running":
            observe(api, ns, pods_dir, seen)
            if time.monotonic() > deadline:
                raise BenchError(f"run still running after 1200 s: {run}")
            time.sleep(2)
        observe(api, ns, pods_dir, seen)
        victim = next(
            p for p in seen.pods.values() if p["metadata"]["uid"] == victim["metadata"]["uid"]
        )
        coord = in_flight(seen.logs.get(victim["metadata"]["name"], ""))
        doc = report(seen, victim, coord, time.monotonic() - started, run["status"], tree)
        return {**doc, "controlplane": note or "the tree's own"}
    finally:
        stop_stack(stack)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="checkout whose CLI and stack run")
    parser.add_argument("--size", type=int, default=32, help="volume edge (voxels)")
    parser.add_argument("--chunk", type=int, default=8, help="chunk edge (voxels)")
    parser.add_argument("--chunk-s", type=float, default=3.0, help="extra seconds per chunk")
    parser.add_argument("--work", type=Path, help="folder for the stack (default: a temp dir)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-image-preemption-"))
    work.mkdir(parents=True, exist_ok=True)
    doc = bench(args.tree.resolve(), work, args.size, args.chunk, args.chunk_s)
    print(json.dumps(doc, indent=2))
    print(table(doc))
    return 0


if __name__ == "__main__":
    run_script(main)  # SIGTERM / Ctrl-C: the finally stops the stack it started
