"""Extra wall time per SIGKILL of a worker on local Kubernetes, with and without claim takeover.

Builds the demo graph (ingest, every layer) on the Bigtable emulator as one real Indexed Job
per layer on local Kubernetes (the real API server, Job controller and scheduler, the
process kubelet; docs/local-cluster.md), all indexes at once, `backoffLimitPerIndex` and
`podReplacementPolicy: Failed` as the controller renders them, with Kubernetes' own
pod-failure back-off (10 s, doubling per failure of an index). Runs the build three ways: no
kill; K kills with claim takeover (this project: the next attempt takes over the dead
attempt's claim at once); K kills with ``PCG_CLAIM_TAKEOVER=0`` (before: the next attempt
waits out the lock expiry). The kills hit index 0 of layer 2, one per attempt, one after
another (so their costs add up instead of overlapping), each right after the attempt logged
its ``kill_after``-th finished chunk plus half a chunk's sleep, i.e. while it holds the next
chunk's claim; the kubelet SIGKILLs the container (exit 137, a counted failure). Each chunk
sleeps ``--chunk-sleep`` seconds on top of the real ingest so kills land mid-window. Every
build is checked by the oracle.

    PYTHONPATH=$PWD python3 bench/bench_kill_recovery.py --kills 3 --expiry 20

Prints one line per build and, per kill: the extra wall time against the no-kill build (noisy
on a shared machine), the Job controller's back-off (the kill to the retry pod's creation),
the time the retry waited for the dead attempt's claim, and the time from the kill to the
retry's first finished chunk (all read from the pods and their kubelet-timestamped logs).
Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from adapters.bigtable.chunk_ledger import (  # noqa: E402
    close_bigtable_client,
    open_bigtable_client,
)
from adapters.common.termination import run_script  # noqa: E402
from adapters.gke.cluster import GkeCluster  # noqa: E402
from adapters.local.emulators import EmulatorSet  # noqa: E402
from adapters.local.kubernetes import LocalKubernetes  # noqa: E402
from demo.graph_table import read_all_nodes  # noqa: E402
from demo.ingest import process_chunk  # noqa: E402
from demo.oracle import compare, expected_stats, observed_stats  # noqa: E402
from demo.volume import generate_volume, save_volume  # noqa: E402
from shared.model.grid import layer_batch_size, num_batches  # noqa: E402
from shared.model.layers import layer_count, layer_shape  # noqa: E402
from tests.builders.local_jobs import ON_SPOT, manifest  # noqa: E402

PROJECT, INSTANCE = "bench", "bench"


def slow_ingest(ctx: Any) -> None:
    """The demo ingest plus a fixed sleep (``BENCH_CHUNK_SLEEP_S``): chunks that take a while."""
    process_chunk(ctx)
    time.sleep(float(os.environ.get("BENCH_CHUNK_SLEEP_S", "0.2")))


def _env(table: str, layer: int, args: Any, takeover: bool) -> dict[str, str]:
    """The worker's env (the kubelet adds the emulators' addresses and PYTHONPATH; the Job
    controller adds JOB_COMPLETION_INDEX)."""
    l2 = tuple(s // c for s, c in zip(args.size, args.chunk, strict=True))
    return {
        "PCG_CLAIM_TAKEOVER": "1" if takeover else "0",
        "PCG_GRAPH_ID": table,
        "PCG_LAYER": str(layer),
        "PCG_PERM_SEED": "7",
        "PCG_BATCH_SIZE": str(args.batch),
        "PCG_GRID_SHAPE": ",".join(map(str, layer_shape(l2, layer))),
        "PCG_STAGE": "ingest",
        "PCG_RUN_ID": table,
        "PCG_N_LAYERS": str(layer_count(l2)),
        "PCG_LOCK_EXPIRY_S": str(args.expiry),
        "BIGTABLE_PROJECT": PROJECT,
        "BIGTABLE_INSTANCE": INSTANCE,
        "PCG_DATASET_JSON": json.dumps(args.dataset),
        "PCG_WORKLOAD": "bench.bench_kill_recovery:slow_ingest",
        "BENCH_CHUNK_SLEEP_S": str(args.chunk_sleep),
        "PCG_LOG_LEVEL": "DEBUG",  # a line per finished chunk: where the kills aim
    }


def _chunk_done(line: str) -> bool:
    return '"chunk ' in line and ' done"' in line


def _stamped(line: str) -> tuple[datetime, str]:
    """A kubelet-timestamped log line: (its time, the worker's line)."""
    stamp, _, text = line.partition(" ")
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{whole}.{(fraction or '0')[:6]:0<6}+00:00"), text


def _kill_index_0(
    gke: GkeCluster, kube: LocalKubernetes, job: str, kills: int, args: Any
) -> list[str]:
    """SIGKILL `kills` attempts of index 0, one after another, each after its `kill_after`-th
    finished chunk plus half a chunk's sleep; the names of the pods killed."""
    killed: list[str] = []
    while len(killed) < kills:
        pods = [
            p for p in gke.list_pods(job, index=0) if p.phase == "Running" and p.name not in killed
        ]
        if not pods:
            time.sleep(0.05)
            continue
        pod = pods[0]
        while (
            sum(map(_chunk_done, gke.pod_log(pod.name, tail_lines=1000).splitlines()))
            < args.kill_after
        ):
            time.sleep(0.05)
        time.sleep(args.chunk_sleep / 2)  # mid-way through the next chunk: its claim is held
        if kube.kill_pod(pod.name):
            killed.append(pod.name)
    return killed


def _recovery(gke: GkeCluster, job: str, killed: list[str]) -> dict[str, float]:
    """Per kill: the back-off (the dead pod's end to its retry's creation), the retry's wait
    for the dead attempt's claim, and the kill to the retry's first finished chunk."""
    pods = sorted(gke.list_pods(job, index=0), key=lambda p: p.created)
    out = {"backoff_s": 0.0, "claim_wait_s": 0.0, "kill_to_progress_s": 0.0}
    for dead, retry in zip(pods, pods[1:], strict=False):
        if dead.name not in killed or dead.finished is None:
            continue
        out["backoff_s"] += (retry.created - dead.finished).total_seconds()
        lines = gke.pod_log_lines(retry.name, tail_lines=5000, timestamps=True).splitlines()
        held_at = None
        for at, text in map(_stamped, lines):
            if "held by another worker; waiting" in text and held_at is None:
                held_at = at
            elif "claimed after waiting" in text and held_at is not None:
                out["claim_wait_s"] += (at - held_at).total_seconds()
            if _chunk_done(text):
                out["kill_to_progress_s"] += (at - dead.finished).total_seconds()
                break
    return out


def build(args: Any, kube: LocalKubernetes, kills: int, takeover: bool) -> dict[str, Any]:
    """One demo build on local Kubernetes; wall time, kills, retries, the oracle's verdict."""
    table = f"bench-{int(time.time() * 1000) % 10**9}-{kills}-{int(takeover)}"
    client = open_bigtable_client(table, PROJECT, INSTANCE, _td(args.expiry), create=True)
    l2 = tuple(s // c for s, c in zip(args.size, args.chunk, strict=True))
    if (kills + 1) * args.kill_after > layer_batch_size(args.batch, 2):
        raise SystemExit("--kills x --kill-after must leave chunks for the last attempt")
    gke = GkeCluster.from_kubeconfig(
        namespace=kube.namespace, config_file=str(kube.admin_kubeconfig)
    )
    stats: dict[str, Any] = {"kills": 0, "retries": 0}
    t0 = time.monotonic()
    for layer in range(2, layer_count(l2) + 1):
        n = num_batches(layer_shape(l2, layer), layer_batch_size(args.batch, layer))
        name = f"{table}-l{layer}"
        job = manifest(
            name,
            completions=n,
            parallelism=n,
            env=_env(table, layer, args, takeover),
            command=[sys.executable, "-m", "worker"],
            backoff_limit_per_index=kills + 3,
            memory="256Mi",
            pod_spec=ON_SPOT,
            podReplacementPolicy="Failed",
        )
        gke.create_job(job)
        if layer == 2 and kills:
            killed = _kill_index_0(gke, kube, name, kills, args)
            stats["kills"] = len(killed)
        while (status := gke.get_job(name)) is None or status.condition not in (
            "Complete",
            "Failed",
        ):
            time.sleep(0.1)
        if status.condition != "Complete":
            raise RuntimeError(f"layer {layer} failed: {status}")
        stats["retries"] += status.failed
        if layer == 2 and kills:
            stats.update(_recovery(gke, name, killed))
    wall = time.monotonic() - t0
    result = compare(args.expected, observed_stats(read_all_nodes(client), layer_count(l2)))
    close_bigtable_client(client)
    rounded = {k: round(v, 1) if isinstance(v, float) else v for k, v in stats.items()}
    return {"wall_s": round(wall, 1), **rounded, "oracle_ok": result.ok}


def _td(seconds: float) -> Any:
    from datetime import timedelta

    return timedelta(seconds=seconds)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kills", type=int, default=3, help="SIGKILLs per build (distinct indexes)")
    p.add_argument("--expiry", type=float, default=20.0, help="lock expiry, seconds")
    p.add_argument("--size", type=int, nargs=3, default=[32, 32, 32])
    p.add_argument("--chunk", type=int, nargs=3, default=[8, 8, 8])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--chunk-sleep", type=float, default=0.2)
    p.add_argument("--kill-after", type=int, default=3, help="finished chunks before the kill")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-kill-"))
    vol = generate_volume(tuple(args.size), seed=3)
    save_volume(tmp / "volume.npy", vol)
    args.dataset = {
        "data_source": {"size": list(args.size), "watershed": str(tmp / "volume.npy")},
        "graph_config": {"CHUNK_SIZE": list(args.chunk), "SPATIAL_BITS": 10},
    }
    l2 = tuple(s // c for s, c in zip(args.size, args.chunk, strict=True))
    args.expected = expected_stats(vol, tuple(args.chunk), layer_count(l2))
    with EmulatorSet(["bigtable"]) as emus:
        os.environ.update(emus.env)
        kube = LocalKubernetes(tmp / "kubernetes", extra_env=emus.env)
        print(
            f"demo {args.size} / {args.chunk} chunks, batch {args.batch}, lock expiry "
            f"{args.expiry:g} s, {args.chunk_sleep:g} s per chunk, {args.kills} kills",
            flush=True,
        )
        with kube:
            none = build(args, kube, 0, True)
            print(f"no kill                      : {none}", flush=True)
            after = build(args, kube, args.kills, True)
            print(f"kills, takeover (now)        : {after}", flush=True)
            before = build(args, kube, args.kills, False)
            print(f"kills, no takeover (before)  : {before}", flush=True)
    for name, run in (("now", after), ("before", before)):
        k = max(run["kills"], 1)
        print(
            f"per kill ({name}): extra wall {(run['wall_s'] - none['wall_s']) / k:.1f} s, "
            f"the Job controller's back-off {run['backoff_s'] / k:.1f} s, "
            f"claim wait {run['claim_wait_s'] / k:.1f} s, kill to the retry's first chunk "
            f"{run['kill_to_progress_s'] / k:.1f} s"
        )


if __name__ == "__main__":
    run_script(main)  # SIGTERM / Ctrl-C: stop the emulators and pods first
