"""How the CLI reaches Firestore and Pub/Sub: from the environment, or from the local stack
that `pipeline local up` started (it leaves its addresses in `<state-dir>/stack.json`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from adapters import wiring

if TYPE_CHECKING:  # the Google clients load when a command connects (`controller` extra)
    from adapters.wiring import FirestoreRunStore
    from shared.ports.message_bus import JsonPublisher

DEFAULT_STACK_DIR = ".local-stack"
# What the probe's error says when the addresses came from this folder's stack file.
STALE_STACK_FILE = (
    f"{DEFAULT_STACK_DIR}/stack.json names it, but the `pipeline local up` that wrote it is "
    "not running: start it again, or remove the file"
)


@dataclass
class Services:
    project: str
    store: FirestoreRunStore
    bus: JsonPublisher

    def kick(self, run_id: str, action: str, by: str = "") -> None:
        """Ask the controller to reconcile now (the action is already in Firestore)."""
        self.bus.publish_json("kick", {"run_id": run_id, "action": action, "by": by})

    def try_kick(self, run_id: str, action: str) -> Exception | None:
        """kick() as the operator, returning the error instead of raising it: the action is
        already stored, so the controller's next tick applies it even if the kick is lost."""
        try:
            self.kick(run_id, action, operator_name())
        except Exception as e:  # noqa: BLE001 - reported by the caller as a warning
            return e
        return None


def load_stack_env(state_dir: str | Path = DEFAULT_STACK_DIR) -> dict[str, str]:
    """The env of a running `pipeline local up`, or {} if none is running there."""
    path = Path(state_dir) / "stack.json"
    if not path.exists():
        return {}
    return json.loads(path.read_text())["env"]


def connect(services: wiring.CliServices | None = None) -> Services:
    """Services from PIPELINE_PROJECT (and the emulator variables, if set), else from a
    local stack running in this folder. Every emulator named must accept a connection
    first (EmulatorUnreachableError within seconds, naming the address, rather than the
    clients' silent minutes of retries). `services`: the CLI's wiring (default
    `wiring.cli_services()`)."""
    services = services or wiring.cli_services()
    stack = {} if os.environ.get("PIPELINE_PROJECT") else load_stack_env()
    os.environ.update(stack)
    try:
        project = wiring.project_from_env()
    except wiring.WiringError as e:
        raise wiring.WiringError(f"{e}, or start `pipeline local up` in this folder") from None
    wiring.check_emulators(cause=STALE_STACK_FILE if stack else None)
    return Services(project, services.run_store(project), services.kick_bus(project))


def operator_name() -> str:
    return os.environ.get("USER") or os.environ.get("LOGNAME") or "operator"
