#!/usr/bin/env bash
# Sets up this checkout on a fresh machine: Python deps (editable install with the dev
# extras), a check that Google's emulators are installed, and Kubernetes' own control plane
# built from Go modules (adapters/local/controlplane; cached by version and go.sum in
# .controlplane/: a first build takes about 4 min on 2 idle cores, later runs seconds).
# Idempotent; fast when done.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "cave-pipeline needs Python >= 3.11")'

stamp=.setup-stamp
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
  echo "setup: installing cave-pipeline[dev] (editable)…" >&2
  python3 -m pip install --quiet --disable-pip-version-check -e ".[dev]"
  touch "$stamp"
fi

# The local stack needs the gcloud SDK's emulators (and Java for two of them).
python3 - <<'PY'
import sys
from adapters.local.emulators import EmulatorMissingError, check_emulators
try:
    check_emulators()
except EmulatorMissingError as e:
    sys.exit(f"setup: {e}")
PY

# Kubernetes' control plane for the local stack and the tests: built once, then reused.
python3 -m adapters.local.controlplane.build
