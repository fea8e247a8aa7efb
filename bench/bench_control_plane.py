"""Local Kubernetes' start time and memory: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler (the binary `scripts/setup.sh` built) with terraform's RBAC and the process
kubelet's three Nodes, started `--runs` times; each process's resident memory read from /proc
once the stack is ready and has run a 10-pod Indexed Job. Prints a table and a JSON line.

    python bench/bench_control_plane.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from adapters.gke.cluster import GkeCluster
from adapters.local.kubernetes import LocalKubernetes

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "bench"},
    "spec": {
        "completionMode": "Indexed",
        "completions": 10,
        "parallelism": 10,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "worker",
                        "image": "unused",
                        "command": ["python", "-c", "print('ok')"],
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                    }
                ],
            }
        },
    },
}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def one_run() -> dict[str, float]:
    t0 = time.monotonic()
    with LocalKubernetes(Path(tempfile.mkdtemp(prefix="bench-kube-"))) as kube:
        ready = time.monotonic() - t0
        cluster = GkeCluster.from_kubeconfig(
            namespace=kube.namespace, config_file=str(kube.controller_kubeconfig)
        )
        t1 = time.monotonic()
        cluster.create_job(JOB)
        while not ((job := cluster.get_job("bench")) and job.finished):
            time.sleep(0.1)
        job_s = time.monotonic() - t1
        out = {"ready_s": round(ready, 2), "job_10_pods_s": round(job_s, 2)}
        out.update({f"{n}_mib": round(rss_mib(pid)) for n, pid in kube.pids().items()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = [one_run() for _ in range(parser.parse_args().runs)]
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    for key, value in median.items():
        print(f"{key:<32}{value:>10}")
    print(json.dumps({"runs": runs, "median": median}))


if __name__ == "__main__":
    main()
