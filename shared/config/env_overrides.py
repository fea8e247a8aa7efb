"""`env:` keys that replace a value the controller sets (docs/predecessor-configs.md). Pure.

The predecessor passed every `env:` key to its pods, after its own: Bigtable's project and
instance (its pods read them from a ConfigMap the container env overrides), the dataset path
and the images' lock scale (which it never set) were the operator's to change. They still
are, each with a note naming what it replaces. The keys the controller derives per run,
layer and pod (graph id, layer, seed, batch size, processes, grid) stay refused: one value in
`env:` would be the same on every layer.
"""

from __future__ import annotations

from shared.config.config_compat import Note
from shared.model.held_wait import HELD_WAIT_ENV
from shared.model.worker_contract import (
    BIGTABLE_INSTANCE,
    BIGTABLE_PROJECT,
    DATASET_DIR,
    DATASET_FILE,
    DATASET_PATH,
    LOCK_EXPIRY_SCALE,
)

# name -> what the controller would set instead (for the note).
OVERRIDABLE: dict[str, str] = {
    BIGTABLE_PROJECT: "bigtable.project",
    BIGTABLE_INSTANCE: "bigtable.instance",
    DATASET_PATH: f"the mounted dataset file {DATASET_DIR}/{DATASET_FILE}",
    LOCK_EXPIRY_SCALE: "the lock scale the controller sets per layer",
    HELD_WAIT_ENV: "the held-chunk wait the controller sets (2 x (claim lifetime + a poll))",
}


def override_notes(env: dict[str, str]) -> list[Note]:
    """One note per `env:` key that replaces a value the controller sets, naming it."""
    return [
        Note(
            f"env.{name}",
            "passed to every pod after the predecessor's own variables",
            f"env.{name}",
            f"{env[name]!r} replaces {what} in every pod",
        )
        for name, what in OVERRIDABLE.items()
        if name in env
    ]
