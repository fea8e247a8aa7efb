#!/usr/bin/env python3
"""Approve layers of a run: a standalone script that needs only google-cloud-firestore.

    python scripts/approve.py --project P RUN_ID STAGE [LAYER ...] [--by NAME]

With no LAYER it approves every layer of STAGE that has not started, so a whole build can
be approved before leaving for the night. It refuses a run, stage or layer that does not
exist. The controller starts an approved layer as soon as the one below is complete (at
the latest on the next one-minute tick; `pipeline approve` also kicks it at once).
Exit codes: 0 approved, 2 no such run/stage/layer, 3 the run changed meanwhile (retry).
"""

from __future__ import annotations

import argparse
import getpass
import sys
from datetime import UTC, datetime

from google.api_core import exceptions as gexc
from google.cloud import firestore


class ApprovalError(ValueError):
    """The run, stage or layer does not exist (the message lists what does)."""


def approve(db: firestore.Client, run_id: str, stage: str, layers: list[int], by: str) -> list[str]:
    """Set the approval flags; returns the layer ids approved. Bumps the run's version under a
    precondition, so a reconcile that read the run before this is retried on fresh state."""
    run_ref = db.collection("runs").document(run_id)
    run = run_ref.get()
    if not run.exists:
        raise ApprovalError(f"no run {run_id!r} in project {db.project}")
    docs = {d.id: d.to_dict() for d in run_ref.collection("layers").stream()}
    mine = {k: d for k, d in docs.items() if d.get("stage") == stage}
    if not mine:
        raise ApprovalError(f"run {run_id} has no stage {stage!r} (it has: {run.get('stages')})")
    if layers:
        missing = [n for n in layers if f"{stage}-L{n}" not in mine]
        if missing:
            have = sorted(d["layer"] for d in mine.values())
            raise ApprovalError(f"{stage} has no layer {missing} (it has {have})")
        keys = [f"{stage}-L{n}" for n in layers]
    else:
        keys = sorted(
            (k for k, d in mine.items() if d.get("phase") == "waiting"),
            key=lambda k: mine[k]["layer"],
        )
    now = datetime.now(UTC)
    batch = db.batch()
    for key in keys:
        if not mine[key].get("approved"):
            fields = {"approved": True, "approved_by": by, "approved_at": now}
            batch.update(run_ref.collection("layers").document(key), fields)
    version = {"version": (run.get("version") or 0) + 1}
    batch.update(run_ref, version, option=db.write_option(last_update_time=run.update_time))
    batch.commit()
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
        keys = approve(
            firestore.Client(project=args.project), args.run_id, args.stage, args.layers, args.by
        )
    except ApprovalError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (gexc.FailedPrecondition, gexc.Aborted):
        print("error: the run changed while approving; run the command again", file=sys.stderr)
        return 3
    print(f"approved {', '.join(keys) or 'nothing (no waiting layers)'} in {args.run_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
