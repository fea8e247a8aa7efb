#!/usr/bin/env bash
# Mutation testing (docs/testing-mutation.md), NOT part of CI.
#
# Usage: bash scripts/mutation_check.sh [PROFILE] [MUTANT_NAME ...]
#   PROFILE core (default): [tool.mutmut] in pyproject.toml: shared/reconcile/decide.py,
#     pod_accounting.py, intervals.py, state.py, build_plan.py, setup_step.py against the fast
#     table tests that cover them (no emulators), run in the tree itself (mutants/).
#   PROFILE pure | worker | controller: [tool.mutation_profiles.PROFILE] in pyproject.toml,
#     run in a copy of the tree under .mutation/PROFILE/. "worker" (the lock keeper and the
#     harness's claim path) and "controller" (its commit / act / publish path) use contract
#     tests: the script starts one set of emulators for the whole run (PCG_TEST_EMULATOR_ENV,
#     tests/conftest.py) and, without MUTANT_NAMEs, mutates only the functions in `focus`.
#   MUTMUT_CHILDREN=N  worker processes (default 1: CPU is scarce)
#   KEEP=1             reuse the previous run's mutants and cached verdicts
# Prints the score per module and the surviving mutants. Inspect one with `mutmut show NAME`
# (in the profile's directory), apply it with `mutmut apply NAME`.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"

if ! command -v mutmut >/dev/null || ! mutmut --version 2>/dev/null | grep -q "version 3\."; then
    echo "installing mutmut 3 (pip install 'mutmut>=3.8,<4')" >&2
    "$python" -m pip install -q 'mutmut>=3.8,<4'
fi

profile=core
if [[ "${1:-}" =~ ^(core|pure|worker|controller)$ ]]; then
    profile="$1"
    shift
fi
# The I/O paths that matter (mutmut's names: module.xǁClassǁmethod__mutmut_N).
declare -A focus=(
    [worker]="worker.lock_keeper.xǁLockKeeperǁ__init____mutmut_* worker.lock_keeper.xǁLockKeeperǁ_renew__mutmut_* worker.harness.xǁBatchRunnerǁ_claim__mutmut_*"
    [controller]="shared.control.reconciler.xǁReconcilerǁcommit__mutmut_* shared.control.reconciler.xǁReconcilerǁact__mutmut_* shared.control.outbox.xǁOutboxǁpublish__mutmut_*"
)
names=("$@")
if [[ ${#names[@]} -eq 0 && -n "${focus[$profile]:-}" ]]; then
    read -r -a names <<<"${focus[$profile]}"
fi

if [[ "$profile" != core ]]; then
    ws="$root/.mutation/$profile"
    if [[ "${KEEP:-0}" != 1 ]]; then
        rm -rf "$ws"
        mkdir -p "$ws"
        for d in shared worker demo scripts functions examples tests; do
            cp -r "$root/$d" "$ws/$d"
        done
        find "$ws" -name __pycache__ -prune -exec rm -rf {} +
        # The profile's table becomes [tool.mutmut]; pytest's settings stay.
        "$python" "$root/scripts/mutation_profile.py" "$root/pyproject.toml" "$profile" \
            >"$ws/pyproject.toml"
    fi
    cd "$ws"
fi

emulator_pid=""
cleanup() { if [[ -n "$emulator_pid" ]]; then kill "$emulator_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT
if [[ "$profile" == worker || "$profile" == controller ]]; then
    rm -f emulators.json
    PYTHONPATH="$root" "$python" "$root/scripts/mutation_profile.py" --emulators emulators.json &
    emulator_pid=$!
    for _ in $(seq 120); do [[ -s emulators.json ]] && break; sleep 1; done
    [[ -s emulators.json ]] || { echo "the emulators did not start" >&2; exit 1; }
    PCG_TEST_EMULATOR_ENV="$(cat emulators.json)"
    export PCG_TEST_EMULATOR_ENV
fi

[[ "${KEEP:-0}" == 1 ]] || rm -rf mutants
mkdir -p mutants
# mutmut puts mutants/ first on sys.path itself; the editable install must not win over it.
unset PYTHONPATH
started=$(date +%s)
mutmut run --max-children "${MUTMUT_CHILDREN:-1}" "${names[@]}" >mutants/run.log 2>&1 || {
    tail -c 3000 mutants/run.log >&2
    echo "mutmut run failed: full output in $PWD/mutants/run.log" >&2
    exit 1
}
echo "mutmut run ($profile): $(($(date +%s) - started)) s, output in $PWD/mutants/run.log"
"$python" "$root/scripts/mutation_profile.py" --score "${names[@]}"
