"""Housekeeping (docs/architecture.md#what-the-predecessor-offered): `pipeline purge` deletes a
run's Firestore documents, `undeploy` pauses every active run and has the controller delete its
Jobs before `terraform destroy` (operator actions, as `pipeline pause` and `pipeline delete`:
the CLI never changes the cluster itself), and `sample` prints a Job that builds a few scattered
chunks of a layer."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import click
import yaml
from rich.console import Console
from rich.table import Table

from scripts import cluster_access
from scripts.cluster_access import cluster_errors, local_stack, reads_local_cluster
from scripts.layer_target import batch_chunks, layer_geometry, run_config
from scripts.options import CONFIG_OPTION
from scripts.services import Services, connect, operator_name
from scripts.views.terminal import console, titled_table
from shared.config.config import JobOverride, PipelineConfig
from shared.config.config_files import load_config
from shared.jobs.manifest import MANAGED_BY, PREFIX, render_job
from shared.model.phase import Phase, RunStatus
from shared.model.state import RunState, layer_key
from shared.operate import operator_actions as ops
from shared.ports.run_store import RunNotFoundError

SAMPLE_RUN_ID = "sample"


class PurgeRefusedError(ValueError):
    """The run is still running: pause or delete it first (or --force)."""


# -- purge ---------------------------------------------------------------------------------------


def _purge(services: Services, run_id: str, yes: bool, force: bool) -> None:
    from adapters.wiring import cli_services

    purge_run, run_job_names = cli_services().purge_run, cli_services().run_job_names
    db = services.store.db
    try:
        run: RunState | None = services.store.load_run(run_id)
    except RunNotFoundError:
        if not run_job_names(db, run_id):
            raise
        run = None  # a half-finished purge: finish it
    if run is not None and run.status == RunStatus.RUNNING and not force:
        raise PurgeRefusedError(
            f"run {run_id} is running: `pipeline pause {run_id}` (or `pipeline delete "
            f"{run_id} STAGE LAYER`) first, or purge with --force (its Jobs keep running, "
            "untracked)"
        )
    names = run_job_names(db, run_id)
    what = f"{run.status} run {run_id} ({len(run.layers)} layers)" if run else f"run {run_id}"
    if not yes:
        click.confirm(
            f"Delete every Firestore document of {what}? Kubernetes Jobs are untouched",
            abort=True,
        )
    deleted = purge_run(db, run_id)
    click.echo(
        f"purged {run_id}: {deleted} documents deleted (run, layers, pod records, "
        f"alerts, {len(names)} job map entries)"
    )
    if names:
        ns = run_config(run).namespace if run else "<namespace>"
        click.echo(f"Kubernetes Jobs untouched; {remove_jobs_hint(names, ns)}")


def remove_jobs_hint(names: list[str], namespace: str) -> str:
    """How the operator removes Jobs the pipeline no longer tracks, where the CLI reads the
    cluster: kubectl, on the local stack with its admin kubeconfig (the operators' Role may not
    delete Jobs, as on GKE)."""
    doc = local_stack() if reads_local_cluster() else None
    if doc is not None:
        return (
            f"if still there: KUBECONFIG={doc['admin_kubeconfig']} kubectl delete job -n "
            f"{doc['namespace']} {' '.join(names)}"
        )
    return f"if still there: kubectl delete job -n {namespace} {' '.join(names)}"


# -- undeploy ------------------------------------------------------------------------------------


def _running_layers(run: RunState) -> list[str]:
    return [ls.key for ls in run.ordered_layers() if ls.phase == Phase.RUNNING and ls.job.name]


def _stop_runs(services: Services, active: list[RunState], yes: bool) -> dict[str, list[str]]:
    """Pause each active run and ask the controller to delete its Jobs (as `pipeline delete`
    of every running layer: the layers stop as failed, `pipeline submit` redoes one).
    Returns the deleted layers by run."""
    jobs = {r.run_id: _running_layers(r) for r in active}
    running = [r.run_id for r in active if r.status == RunStatus.RUNNING]
    n_jobs = sum(len(v) for v in jobs.values())
    if (n_jobs or running) and not yes:
        click.confirm(
            f"Pause {len(running)} running run(s) and delete {n_jobs} Job(s) with their pods "
            f"({', '.join(k for v in jobs.values() for k in v) or 'none'})?",
            abort=True,
        )
    deleted: dict[str, list[str]] = {}
    by, now = operator_name(), datetime.now(UTC)

    def stop(run: RunState) -> None:
        if run.status == RunStatus.RUNNING:
            ops.pause(run)
        keys = _running_layers(run)
        for key in keys:
            ls = run.layers[key]
            ops.cancel(run, ls.stage, ls.layer, by, now)
        deleted[run.run_id] = keys

    for r in active:
        services.store.update_run(r.run_id, stop)
        error = services.try_kick(r.run_id, "undeploy")
        if error is not None:
            click.echo(
                f"warning: kick for {r.run_id} not sent ({error}); the controller's next tick "
                "deletes the Jobs",
                err=True,
            )
    return deleted


def _active_runs_table(active: list[RunState], deleted: dict[str, list[str]]) -> Table:
    n = sum(len(v) for v in deleted.values())
    table = titled_table(
        f"active runs: {len(active)} ({n} Jobs deleted now)",
        ("run", "graph", "status", "Jobs deleted (layers stop as failed)"),
    )
    for r in active:
        table.add_row(r.run_id, r.graph_id, RunStatus.PAUSED, ", ".join(deleted.get(r.run_id, [])))
    return table


def _remaining_jobs(out: Console, deleted: dict[str, set[str]]) -> None:
    """The pipeline's Jobs still in the cluster (those just deleted go within a reconcile)."""
    try:
        with cluster_errors():
            cluster = cluster_access.read_cluster()
            jobs = cluster.list_jobs({"app.kubernetes.io/managed-by": MANAGED_BY})
    except (click.ClickException, ConnectionError, ValueError) as e:
        msg = e.format_message() if isinstance(e, click.ClickException) else str(e)
        out.print(f"(cannot list the cluster's Jobs: {msg})", markup=False)
        return
    table = titled_table(
        f"pipeline Jobs in the cluster: {len(jobs)}",
        ("job", "run", "stage", "layer", "state", "active"),
    )
    untracked = []
    for j in jobs:
        state = j.condition or ("suspended" if j.suspended else "running")
        run_id = j.annotations.get(PREFIX + "run-id", j.labels.get(PREFIX + "run", ""))
        stage, layer = j.labels.get(PREFIX + "stage", ""), j.labels.get(PREFIX + "layer", "")
        key = layer_key(stage, int(layer)) if layer.isdigit() else ""
        if key in deleted.get(run_id, set()):
            state = "deleting"
        elif not j.finished:
            untracked.append(j.name)
        table.add_row(j.name, run_id, stage, layer, state, str(j.active))
    out.print(table)
    if untracked:
        namespace = os.environ.get(cluster_access.NAMESPACE_ENV, "<namespace>")
        out.print(
            "not tracked by an active run (a `pipeline sample`, a purged run); "
            + remove_jobs_hint(untracked, namespace),
            markup=False,
        )


TERRAFORM_REMOVES = (
    "the GKE Autopilot cluster (with any Job left in it), the Cloud Functions and their source "
    "bucket, the Pub/Sub topics and subscription, the Job-event log sink, the Cloud Scheduler "
    "tick, the Artifact Registry repository, the service accounts and IAM bindings"
)


def _what_remains() -> str:
    last = (
        "local stack: stop `pipeline local up` (Ctrl-C); there is nothing to destroy"
        if reads_local_cluster()
        else "next: cd terraform && terraform destroy (with deletion_protection = false)"
    )
    return "\n".join(
        [
            f"`terraform destroy` removes: {TERRAFORM_REMOVES}.",
            "It leaves: the Firestore database (run history and costs; `pipeline purge RUN` "
            "removes a run), Bigtable tables and data buckets (not managed by terraform).",
            last,
        ]
    )


# -- sample --------------------------------------------------------------------------------------


def sample_job(cfg: PipelineConfig, stage: str, layer: int, n: int) -> dict[str, Any]:
    """The layer's Job with batch size 1 and `n` completions: pod i builds the chunk at
    shuffled position i, so the n chunks are scattered over the whole grid."""
    override = cfg.job.workloads.get(stage) or JobOverride()
    workloads = {**cfg.job.workloads, stage: override.model_copy(update={"batch_size": 1})}
    one = cfg.model_copy(update={"job": cfg.job.model_copy(update={"workloads": workloads})})
    parallelism = min(n, one.job.for_stage(stage).ramp.max)
    manifest = render_job(one, stage, layer, run_id=SAMPLE_RUN_ID, parallelism=parallelism)
    # `...-l<layer>-sample`: a run's Jobs end in a hex hash, so this never names one of them.
    manifest["metadata"]["name"] = manifest["metadata"]["name"].rsplit("-", 1)[0] + "-sample"
    chunks = int(manifest["metadata"]["annotations"][PREFIX + "chunks"])
    if n > chunks:
        raise ValueError(f"{stage} layer {layer} has {chunks} chunks: sample at most {chunks}")
    spec = manifest["spec"]
    # Every sampled chunk should run: failing ones do not stop the others.
    spec["completions"], spec["maxFailedIndexes"] = n, n
    manifest["metadata"]["annotations"][PREFIX + "sample"] = str(n)
    return manifest


def sample_chunks(cfg: PipelineConfig, stage: str, layer: int, n: int) -> list[tuple[int, ...]]:
    shape, seed, _ = layer_geometry(cfg, stage, layer)
    return [batch_chunks(i, shape, seed, 1)[0] for i in range(n)]


def _sample_notes(
    cfg: PipelineConfig, config_path: str, manifest: dict[str, Any], stage: str, layer: int, n: int
) -> list[str]:
    """What the sample Job is, and how to apply, watch and remove it (comment lines)."""
    name, ns = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
    total = manifest["metadata"]["annotations"][PREFIX + "chunks"]
    note = [
        f"# sample: {n} of {total} chunks of {stage} L{layer}, one per pod (batch size 1), "
        f"scattered by the shuffle (seed {cfg.job.for_stage(stage).perm_seed})",
    ]
    if reads_local_cluster():
        note.append(
            "# the local stack's cluster runs only the Jobs its controller creates: "
            "this cannot be applied to it from the CLI; watch a run's layer with "
            "`pipeline top RUN STAGE LAYER` instead"
        )
    else:
        note.append(
            f"# apply:  pipeline sample -c {config_path} {stage} {layer} {n} | kubectl create -f -"
        )
    return note + [
        f"# watch:  pipeline top --job {name}  ·  pipeline pods --job {name}  ·  "
        f"pipeline inspect --job {name} INDEX",
        f"# then:   set job.resources from the peak; kubectl delete job -n {ns} {name}",
    ]


# -- commands ------------------------------------------------------------------------------------


@click.command()
@click.argument("run_id")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help="Purge even a running run.")
def purge(run_id: str, yes: bool, force: bool) -> None:
    """Delete a run's Firestore documents: run, layers, pod records, alerts and its Job
    map entries. Kubernetes Jobs are untouched (delete them with kubectl, or let
    `terraform destroy` take them with the cluster)."""
    _purge(connect(), run_id, yes, force)


@click.command()
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def undeploy(yes: bool) -> None:
    """Delete the pipeline's Jobs in the cluster (after a confirmation): every active run is
    paused and the controller deletes the Jobs of its running layers with their pods (as
    `pipeline delete`: those layers stop as failed, `pipeline submit` redoes one). Then list
    the Jobs left and what `terraform destroy` removes. Re-run it to see the Jobs gone."""
    services, out = connect(), console()
    active = [services.store.load_run(r) for r in services.store.active_runs()]
    deleted = _stop_runs(services, active, yes)
    out.print(_active_runs_table(active, deleted))
    _remaining_jobs(out, {k: set(v) for k, v in deleted.items()})
    click.echo(_what_remains())


@click.command()
@CONFIG_OPTION
@click.argument("stage")
@click.argument("layer", type=int)
@click.argument("n", type=click.IntRange(min=1))
@click.option("--chunks", is_flag=True, help="List the sampled chunks (on stderr).")
def sample(config_path: str, stage: str, layer: int, n: int, chunks: bool) -> None:
    """Print a Job that builds N scattered chunks of STAGE LAYER, one per pod, to size CPU
    and memory before the full run.

    It is the layer's Job with batch size 1 and N completions: pod i builds shuffled
    position i, and the shuffle spreads positions 0..N-1 over the whole grid. The
    controller does not track it; apply it yourself (GKE), then watch it with
    `pipeline top --job NAME`. The chunks are built for real: ingest marks them done and
    the full run skips them, so sample a layer only once the layer below is complete.
    """
    cfg = load_config(config_path)
    manifest = sample_job(cfg, stage, layer, n)
    click.echo(yaml.safe_dump(manifest, sort_keys=False), nl=False)
    note = _sample_notes(cfg, config_path, manifest, stage, layer, n)
    if chunks:
        sampled = sample_chunks(cfg, stage, layer, n)
        note += [f"# pod {i}: chunk {c}" for i, c in enumerate(sampled)]
    click.echo("\n".join(note), err=True)


COMMANDS = (purge, undeploy, sample)
