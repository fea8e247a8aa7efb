#!/usr/bin/env python3
"""Approve layers of a run: a standalone script, for a machine without the `pipeline` CLI's
other needs (no cluster access, no Pub/Sub).

    python scripts/approve.py --project P RUN_ID STAGE [LAYER ...] [--by NAME]

With no LAYER it approves every layer of STAGE that has not started, so a whole build can
be approved before leaving for the night. It refuses a run, stage or layer that does not
exist. It applies the same operator action as `pipeline approve` through the same run store
port (docs/ports-and-wiring.md), so the Firestore documents have one writer. The controller
starts an approved layer as soon as the one below is complete (at the latest on the next
one-minute tick; `pipeline approve` also kicks it at once).
Exit codes: 0 approved, 2 no such run/stage/layer, 3 the run changed meanwhile (retry).
"""

from __future__ import annotations

import argparse
import getpass
import sys
from datetime import UTC, datetime

from adapters.wiring import approval_store
from shared.model.state import RunState
from shared.operate import operator_actions as ops
from shared.ports.run_store import RunNotFoundError, RunRecords, StaleStateError


def approve(runs: RunRecords, run_id: str, stage: str, layers: list[int], by: str) -> list[str]:
    """Approve `layers` of `stage` (all waiting ones if empty) as `by`; returns the layer keys
    approved. Under the run's version precondition, retried on a lost race by the store."""
    keys: list[str] = []

    def act(run: RunState) -> None:
        # Applied again after a lost race: keep the last answer.
        keys[:] = ops.approve(run, stage, layers, by, datetime.now(UTC))

    runs.update_run(run_id, act)
    return keys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", required=True, help="project of the Firestore database")
    parser.add_argument("--by", default=getpass.getuser(), help="who approves (recorded)")
    parser.add_argument("run_id")
    parser.add_argument("stage")
    parser.add_argument("layers", nargs="*", type=int)
    args = parser.parse_args(argv)
    try:
        keys = approve(approval_store(args.project), args.run_id, args.stage, args.layers, args.by)
    except (RunNotFoundError, ops.ActionError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except StaleStateError:
        print("error: the run changed while approving; run the command again", file=sys.stderr)
        return 3
    print(f"approved {', '.join(keys) or 'nothing (no waiting layers)'} in {args.run_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
