#!/usr/bin/env bash
# Check that each extra of pyproject.toml is enough for the packages it names, in a fresh venv:
#
#   .[worker]      shared + worker: `python -m worker` starts and names its first missing variable
#   .[controller]  the Cloud Functions' imports (functions/main.py and the GKE/Google adapters)
#   .[cli]         `pipeline --help` and every command's `--help`, and the pure grid commands
#   .[demo]        the demo workloads and oracles import
#   .[dev]         the test suite collects
#
# A missing dependency shows up here instead of in a pod, a function's cold start or an
# operator's terminal. Uses `uv` (fast venvs from the local cache); installs it with pip if
# missing. Usage: bash scripts/check_extras.sh [EXTRA ...]   (default: all five)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
extras=("$@")
[[ ${#extras[@]} -gt 0 ]] || extras=(worker controller cli demo dev)

if ! command -v uv >/dev/null; then
  "$python" -m pip install --quiet --disable-pip-version-check uv >&2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# A copy of the checkout without build leftovers, so the install sees only tracked sources.
git -C "$root" ls-files -z | (cd "$root" && tar --null -T - -cf -) | (mkdir -p "$work/src" && tar -C "$work/src" -xf -)

probe() {  # probe EXTRA: commands that must succeed with only that extra installed
  local venv=$1 extra=$2 py="$1/bin/python"
  case "$extra" in
    worker)
      # Exits 42 and names the first variable it lacks: imports and start-up work.
      local out
      out="$(cd "$work" && env -i PATH=/usr/bin:/bin "$py" -m worker 2>&1)" && return 1 || true
      grep -q 'PCG_' <<<"$out" || { echo "$out"; return 1; }
      ;;
    controller)
      (cd "$work" && "$py" -c "import importlib.util, sys
spec = importlib.util.spec_from_file_location('main', '$work/src/functions/main.py')
spec.loader.exec_module(importlib.util.module_from_spec(spec))
import adapters.gke.cluster, adapters.google.firestore_store, adapters.google.pubsub_bus")
      ;;
    cli)
      "$venv/bin/pipeline" --help >/dev/null
      local cmd
      for cmd in $(cd "$work" && "$py" -c "from scripts.cli import main; print(' '.join(sorted(main.commands)))"); do
        "$venv/bin/pipeline" "$cmd" --help >/dev/null || { echo "pipeline $cmd --help failed"; return 1; }
      done
      "$venv/bin/pipeline" locate --help >/dev/null
      ;;
    demo)
      (cd "$work" && "$py" -c "import demo.ingest, demo.l2cache, demo.meshing, demo.oracles")
      ;;
    dev)
      (cd "$work/src" && "$py" -m pytest -q --collect-only -p no:cacheprovider >/dev/null)
      ;;
    *) echo "unknown extra $extra"; return 1 ;;
  esac
}

failed=()
for extra in "${extras[@]}"; do
  venv="$work/venv-$extra"
  uv venv --quiet --python "$python" "$venv"
  if ! VIRTUAL_ENV="$venv" uv pip install --quiet "$work/src[$extra]" >"$work/$extra.log" 2>&1; then
    echo "extras: .[$extra] does not install:" >&2; tail -20 "$work/$extra.log" >&2
    failed+=("$extra"); continue
  fi
  if probe "$venv" "$extra" >"$work/$extra.probe" 2>&1; then
    echo "extras: .[$extra] ok"
  else
    echo "extras: .[$extra] is not enough for what it names:" >&2; tail -20 "$work/$extra.probe" >&2
    failed+=("$extra")
  fi
done
[[ ${#failed[@]} -eq 0 ]] || { echo "extras failing: ${failed[*]}" >&2; exit 1; }
