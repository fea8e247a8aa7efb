"""`pipeline doctor`: the project checked against everything a build needs, before it spends
money (docs/doctor.md); and the cheap subset `pipeline start` runs first (`preflight`)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import click

from scripts.exits import error_line
from scripts.options import CONFIG_OPTION, JSON_OPTION
from scripts.services import load_stack_env
from shared.config.config import PipelineConfig
from shared.config.config_files import load_config
from shared.doctor import checks as doctor_checks
from shared.doctor import needs
from shared.doctor.deployment import Deployment, deployment_of
from shared.doctor.verdicts import (
    EXIT_UNREACHABLE,
    CheckResult,
    PreflightFailedError,
    Verdict,
    blocks_start,
    exit_code,
)

MARK = {
    Verdict.PASS: "ok  ",
    Verdict.FAIL: "FAIL",
    Verdict.WARN: "warn",
    Verdict.SKIP: "skip",
    Verdict.UNREACHABLE: "????",
}


# Emulators answer their first calls slowly on a busy machine (a JVM warming up).
LOCAL_DEADLINE_S = 30.0


@dataclass
class Diagnosis:
    """What the doctor found: where it looked (`target`: cloud or local) and each check."""

    target: str
    project: str
    results: list[CheckResult]
    note: str = ""

    @property
    def exit_code(self) -> int:
        return exit_code(self.results)

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "project": self.project,
            "exit_code": self.exit_code,
            "note": self.note,
            "checks": [r.to_json() for r in self.results],
        }


def _environment() -> dict[str, str]:
    """The process environment, with a local stack's running in this folder (as `connect`)."""
    if not os.environ.get("PIPELINE_PROJECT"):
        os.environ.update(load_stack_env())  # the clients read the emulators' addresses here
    return dict(os.environ)


def diagnose(
    cfg: PipelineConfig,
    selected: list[doctor_checks.Check],
    common_name: str | None = None,
    env: Mapping[str, str] | None = None,
    stages: list[str] | None = None,
) -> Diagnosis:
    """Run `selected` against the local stack (when the environment names emulators) or the
    config's project, for a run of `stages` (default: the dataset's build DAG).
    ServiceUnreachable (exit 3) when no credential or network is there."""
    env = _environment() if env is None else dict(env)
    try:
        import google.auth  # noqa: F401 - the calls' credentials
        import requests  # noqa: F401 - and their transport

        from adapters import wiring

        services = wiring.cli_services()
        local = services.is_local(env)  # loads the doctor's adapters and their clients
    except ImportError as e:  # the Google clients are in the `controller` extra
        raise click.ClickException(
            f"pipeline doctor needs the Google clients ({e}): pip install "
            "'cave-pipeline[controller]'"
        ) from None

    needs.planned_vcpus(cfg)  # a config the planner refuses is a config error (exit 2) here
    dep = _with_stage_tables(deployment_of(cfg, common_name), cfg, stages)
    if local:
        dep = dataclasses.replace(dep, project=env.get("PIPELINE_PROJECT") or dep.project)
        fetchers = services.doctor_facts(cfg, dep, env, load_stack_env())
        results = services.run_checks(
            selected,
            fetchers,
            dep,
            skip_reason="local stack: a cloud resource, not checked",
            deadline_s=LOCAL_DEADLINE_S,
            unreachable_fix=doctor_checks.LOCAL_UNREACHABLE_FIX,
        )
        return Diagnosis("local", dep.project, results)
    fetchers = services.doctor_facts(cfg, dep, env, {})
    return Diagnosis("cloud", dep.project, services.run_checks(selected, fetchers, dep))


def _with_stage_tables(
    dep: Deployment, cfg: PipelineConfig, stages: list[str] | None
) -> Deployment:
    """`dep` expecting the tables the stages write besides the graph's (scripts.run_tables)."""
    from scripts.run_tables import extra_tables
    from shared.config.stage_selection import check_stages, default_stages

    wanted = check_stages(cfg, stages) if stages else default_stages(cfg)
    found = tuple((t.stage, t.table_id) for t in extra_tables(cfg, wanted))
    return dataclasses.replace(dep, stage_tables=found)


def render(diagnosis: Diagnosis) -> str:
    """The checks as an operator reads them: one line each, the fix indented under it."""
    where = "local stack" if diagnosis.target == "local" else f"project {diagnosis.project}"
    lines = [f"pipeline doctor: {where}"]
    for r in diagnosis.results:
        lines.append(f"  {MARK[r.verdict]}  {r.title:<36} {r.detail}")
        if r.fix and r.verdict is not Verdict.PASS:
            lines.append(f"        fix: {r.fix}")
    counts = {v: sum(r.verdict is v for r in diagnosis.results) for v in Verdict}
    summary = ", ".join(f"{n} {v.value}" for v, n in counts.items() if n)
    lines.append(f"{summary} (exit {diagnosis.exit_code})")
    return "\n".join(lines)


def _unreachable_exit(
    message: str, as_json: bool, cfg: PipelineConfig, selected: list[doctor_checks.Check]
) -> None:
    """No credential or no token: every check unreachable (the JSON carries each), exit 3."""
    if as_json:
        results = [c.unreachable(message) for c in selected]
        doc = {**Diagnosis("cloud", cfg.project, results, message).to_json(), "error": message}
        click.echo(json.dumps(doc, indent=2))
    click.echo(error_line(message), err=True)
    raise SystemExit(EXIT_UNREACHABLE)


@click.command()
@CONFIG_OPTION
@JSON_OPTION
@click.option(
    "--common-name",
    default=None,
    help="terraform's common_name (default: read from workload_identity.gsa_email, else "
    "cave-pipeline).",
)
@click.option(
    "--check",
    "only",
    multiple=True,
    type=click.Choice(doctor_checks.CHECK_IDS),
    help="Run only this check (repeatable).",
)
@click.option("--cheap", is_flag=True, help="Only the checks `pipeline start` runs first.")
def doctor(
    config_path: str, as_json: bool, common_name: str | None, only: tuple[str, ...], cheap: bool
) -> None:
    """Check the project against everything a build needs, each with a verdict and its fix:
    APIs, Firestore, topics and dead letters, the log sink, the Scheduler job, the functions,
    Bigtable and the graph table, accounts and grants, Workload Identity, the cluster through
    its DNS endpoint and RBAC, images, Spot quota, the dataset's paths. Against a local stack
    only what it has. Exit 0 all pass, 1 a check failed or warns, 2 config error, 3 a service
    or the credentials cannot be reached."""
    from adapters.wiring import ServiceUnreachable

    cfg = load_config(config_path)
    selected = doctor_checks.select(list(only) or None, cheap_only=cheap)
    try:
        diagnosis = diagnose(cfg, selected, common_name)
    except ServiceUnreachable as e:
        _unreachable_exit(str(e), as_json, cfg, selected)
        return
    click.echo(json.dumps(diagnosis.to_json(), indent=2) if as_json else render(diagnosis))
    raise SystemExit(diagnosis.exit_code)


def preflight(
    cfg: PipelineConfig,
    run: Callable[..., Diagnosis] | None = None,
    stages: list[str] | None = None,
) -> None:
    """`pipeline start`'s first step: the cheap checks, for a run of `stages` (default: the
    dataset's build DAG). Warnings are printed; a failed check refuses the start
    (PreflightFailedError, exit 2) naming `--no-preflight`; a check that got no answer is
    reported and the start goes on (its own calls then tell a service that is down); no usable
    credential is a ConnectionError (exit 3). `run`: diagnose (the default) or a stand-in
    giving the diagnosis."""
    from adapters.wiring import ServiceUnreachable

    if run is None:

        def run(cfg: PipelineConfig, checks: list[doctor_checks.Check]) -> Diagnosis:
            return diagnose(cfg, checks, stages=stages)

    try:
        diagnosis = run(cfg, doctor_checks.select(cheap_only=True))
    except ServiceUnreachable as e:
        raise ConnectionError(f"preflight: {e}") from None
    shown = [r for r in diagnosis.results if r.verdict in (Verdict.FAIL, Verdict.WARN)]
    for r in shown:
        click.echo(f"preflight {r.verdict.value}: {r.title}: {r.detail}", err=True)
        if r.fix:
            click.echo(f"  fix: {r.fix}", err=True)
    for r in diagnosis.results:  # the start's own calls report a service that is really down
        if r.verdict is Verdict.UNREACHABLE:
            click.echo(f"preflight: {r.title} not checked ({r.detail}); starting anyway", err=True)
    if blocks_start(diagnosis.results):
        raise PreflightFailedError(
            "preflight failed (above); fix it, see `pipeline doctor`, or start with --no-preflight"
        )


COMMANDS = (doctor,)
