"""A batch/v1 Job manifest as the local cluster reads it: validated, parsed into a `JobSpec`.

Only what the local cluster acts on is read; the checks mirror the API server's validation
for those fields, so a manifest the local cluster accepts is not rejected by GKE for them.
Quantities follow Kubernetes' resource.Quantity syntax ("500m", "1.5", "512Mi", "2Gi", "1e9").
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from adapters.local.cluster.mounts import Mount, parse_mounts
from shared.ports.cluster import ManifestRejectedError

log = logging.getLogger("cave_pipeline.local_cluster")

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$"
)
_SUFFIX = {
    **{s: 2.0 ** (10 * (i + 1)) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    **{"n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12},
    **{"P": 1e15, "E": 1e18},
}
ACTIONS = ("Ignore", "FailIndex", "FailJob", "Count")
COMPLETION_INDEX_FIELDS = (
    "metadata.annotations['batch.kubernetes.io/job-completion-index']",
    "metadata.labels['batch.kubernetes.io/job-completion-index']",
)


def parse_quantity(value: Any) -> float:
    """A Kubernetes quantity as a float in base units. Raises ValueError."""
    if isinstance(value, bool):
        raise ValueError(f"bad quantity {value!r}")
    if isinstance(value, int | float):
        return float(value)
    m = _QUANTITY.match(str(value).strip())
    if not m:
        raise ValueError(f"bad quantity {value!r}: expected e.g. 500m, 1.5, 512Mi, 2Gi")
    number, exponent, suffix = m.groups()
    scale = 10.0 ** int(exponent[1:]) if exponent else _SUFFIX.get(suffix or "", 1.0)
    return float(number) * scale


@dataclass(frozen=True)
class FailureRule:
    """One podFailurePolicy rule."""

    action: str
    operator: str | None = None  # In / NotIn, for onExitCodes
    exit_codes: frozenset[int] = frozenset()
    container_name: str | None = None
    conditions: tuple[tuple[str, str], ...] = ()  # (type, status), for onPodConditions

    def matches(self, exit_code: int | None, conditions: set[str], container: str) -> bool:
        if self.operator is not None:
            if exit_code is None or (self.container_name not in (None, container)):
                return False
            if self.operator == "In":
                return exit_code in self.exit_codes
            return exit_code != 0 and exit_code not in self.exit_codes
        return any(status == "True" and ctype in conditions for ctype, status in self.conditions)


def match_failure_rule(
    rules: tuple[FailureRule, ...], exit_code: int | None, conditions: set[str], container: str
) -> FailureRule | None:
    """The first rule that matches a failed pod (Kubernetes evaluates them in order)."""
    return next((r for r in rules if r.matches(exit_code, conditions, container)), None)


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str | None = None
    field_path: str | None = None  # valueFrom.fieldRef.fieldPath


@dataclass(frozen=True)
class JobSpec:
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    completions: int
    parallelism: int
    suspend: bool
    backoff_limit: int | None  # None: unlimited (the default with backoffLimitPerIndex)
    backoff_limit_per_index: int | None
    max_failed_indexes: int | None
    rules: tuple[FailureRule, ...]
    container_name: str
    argv: tuple[str, ...]
    env: tuple[EnvVar, ...]
    cpu: float  # vCPU requested
    memory_gib: float
    grace_seconds: float
    pod_labels: dict[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()  # Secret and ConfigMap volume mounts


def _reject(message: str) -> ManifestRejectedError:
    return ManifestRejectedError(f"Job manifest rejected: {message}")


def _int(spec: dict[str, Any], key: str, default: int | None, minimum: int = 0) -> int | None:
    value = spec.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _reject(f"spec.{key} must be an integer >= {minimum}, got {value!r}")
    return value


def _rules(policy: Any, per_index: int | None) -> tuple[FailureRule, ...]:
    if policy is None:
        return ()
    if not isinstance(policy, dict) or not isinstance(policy.get("rules"), list):
        raise _reject("spec.podFailurePolicy.rules must be a list")
    out: list[FailureRule] = []
    for i, rule in enumerate(policy["rules"]):
        where = f"spec.podFailurePolicy.rules[{i}]"
        action = rule.get("action") if isinstance(rule, dict) else None
        if action not in ACTIONS:
            raise _reject(f"{where}.action must be one of {ACTIONS}, got {action!r}")
        if action == "FailIndex" and per_index is None:
            raise _reject(f"{where}: action FailIndex needs spec.backoffLimitPerIndex")
        codes, conds = rule.get("onExitCodes"), rule.get("onPodConditions")
        if (codes is None) == (conds is None):
            raise _reject(f"{where}: set exactly one of onExitCodes and onPodConditions")
        if codes is not None:
            op, values = codes.get("operator"), codes.get("values")
            if op not in ("In", "NotIn") or not isinstance(values, list) or not values:
                raise _reject(f"{where}.onExitCodes needs operator In/NotIn and values")
            if op == "In" and 0 in values:
                raise _reject(f"{where}.onExitCodes: value 0 is not allowed with operator In")
            exits = frozenset(int(v) for v in values)
            out.append(FailureRule(action, op, exits, codes.get("containerName")))
        else:
            if not isinstance(conds, list) or not conds:
                raise _reject(f"{where}.onPodConditions must be a non-empty list")
            pairs = tuple((str(c["type"]), str(c.get("status", "True"))) for c in conds)
            out.append(FailureRule(action, conditions=pairs))
    return tuple(out)


def _env(container: dict[str, Any]) -> tuple[EnvVar, ...]:
    out: list[EnvVar] = []
    for item in container.get("env") or []:
        name = item.get("name")
        if not name:
            raise _reject("every container env entry needs a name")
        ref = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if "valueFrom" in item and not ref:
            log.warning("env %s: only fieldRef is resolved locally; set it via extra_env", name)
            continue
        out.append(EnvVar(name, None if ref else str(item.get("value", "")), ref))
    return tuple(out)


def _requests(container: dict[str, Any]) -> tuple[float, float]:
    resources = container.get("resources") or {}
    # Kubernetes defaults requests to limits when only limits are given.
    values = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    out: list[float] = []
    for key in ("cpu", "memory"):
        try:
            out.append(parse_quantity(values.get(key, 0)))
        except ValueError as e:
            raise _reject(f"containers[0].resources.requests.{key}: {e}") from None
    return out[0], out[1] / 2**30


def parse_manifest(manifest: dict[str, Any]) -> JobSpec:
    """Validate and parse a Job manifest. Raises ManifestRejectedError naming the field."""
    if not isinstance(manifest, dict) or manifest.get("kind", "Job") != "Job":
        raise _reject("expected a dict with kind: Job")
    if manifest.get("apiVersion", "batch/v1") != "batch/v1":
        raise _reject(f"apiVersion must be batch/v1, got {manifest.get('apiVersion')!r}")
    meta = manifest.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or len(name) > 63 or not _NAME.match(name):
        raise _reject(f"metadata.name {name!r} must be a DNS-1123 label of at most 63 chars")
    spec = manifest.get("spec") or {}
    if spec.get("completionMode") != "Indexed":
        raise _reject(
            f"spec.completionMode is {spec.get('completionMode')!r}; "
            "the local cluster runs Indexed Jobs only"
        )
    completions = _int(spec, "completions", None)
    if completions is None:
        raise _reject("spec.completions is required for an Indexed Job")
    per_index = _int(spec, "backoffLimitPerIndex", None)
    if spec.get("podReplacementPolicy", "Failed") != "Failed":  # the only one implemented
        raise _reject("spec.podReplacementPolicy: the local cluster implements only Failed")
    max_failed = _int(spec, "maxFailedIndexes", None)
    if max_failed is not None and (per_index is None or max_failed > completions):
        raise _reject("spec.maxFailedIndexes needs backoffLimitPerIndex and <= completions")
    backoff = _int(spec, "backoffLimit", None if per_index is not None else 6)
    template = (spec.get("template") or {}).get("spec") or {}
    if template.get("restartPolicy") != "Never":
        raise _reject("spec.template.spec.restartPolicy must be Never")
    containers = template.get("containers") or []
    if not containers or not isinstance(containers[0], dict):
        raise _reject("spec.template.spec.containers must hold at least one container")
    container = containers[0]
    argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    if not container.get("command"):
        raise _reject("containers[0].command is required (the local cluster has no images)")
    suspend = spec.get("suspend", False)
    if not isinstance(suspend, bool):
        raise _reject(f"spec.suspend must be a boolean, got {suspend!r}")
    for unsupported in ("activeDeadlineSeconds", "successPolicy"):
        if unsupported in spec:
            log.warning("job %s: spec.%s is ignored by the local cluster", name, unsupported)
    cpu, memory = _requests(container)
    return JobSpec(
        name=name,
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
        completions=completions,
        parallelism=_int(spec, "parallelism", 1) or 0,
        suspend=suspend,
        backoff_limit=backoff,
        backoff_limit_per_index=per_index,
        max_failed_indexes=max_failed,
        rules=_rules(spec.get("podFailurePolicy"), per_index),
        container_name=str(container.get("name", "")),
        argv=tuple(argv),
        env=_env(container),
        cpu=cpu,
        memory_gib=memory,
        grace_seconds=float(template.get("terminationGracePeriodSeconds", 30)),
        mounts=parse_mounts(template, container),
        pod_labels={
            str(k): str(v)
            for k, v in (
                ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
            ).items()
        },
    )
