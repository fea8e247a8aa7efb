"""Does an emulator named in the environment answer? A TCP connect to each
`*_EMULATOR_HOST` address, a few seconds at most, before any client is built on it.

The Google clients retry a silent emulator for minutes (Firestore's about 293 s) without a
word, so a shell whose local stack stopped while its `export` lines stayed would hang the
CLI: the probe turns that into an error within seconds that names the address and the
likely cause. Only the standard library is used here.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

EMULATOR_VARS: tuple[str, ...] = (
    "FIRESTORE_EMULATOR_HOST",
    "PUBSUB_EMULATOR_HOST",
    "BIGTABLE_EMULATOR_HOST",
)
# A local emulator accepts (or refuses) a connection at once; a few seconds covers a loaded
# machine and an address that drops packets, and is far short of the clients' retries.
PROBE_TIMEOUT_S = 3.0
STALE_ENV = (
    "the local stack is probably down and the *_EMULATOR_HOST variables are left over "
    "from it: start it again (`pipeline local up` in this folder, or "
    '`eval "$(pipeline local env)"` for one running elsewhere), or `unset {names}` to use '
    "Google Cloud"
)


class EmulatorUnreachableError(ConnectionError):
    """An emulator address from the environment accepts no connection; the message names
    the variable, the address, why, and what to do."""

    def __init__(self, var: str, address: str, why: str, cause: str) -> None:
        self.var, self.address, self.why = var, address, why
        super().__init__(f"nothing answers at {address} ({var}): {why}; {cause}")


def named_emulators(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The emulator variables set (non-empty) in `env` (default: the process's), by name."""
    env = os.environ if env is None else env
    return {var: env[var] for var in EMULATOR_VARS if env.get(var)}


def probe(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why `address` (`host:port`) accepts no TCP connection within `timeout_s`, or None
    when it does."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return "not a host:port address"
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout_s).close()
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except OSError as e:
        return (e.strerror or type(e).__name__).lower()
    return None


def check_emulators(
    env: Mapping[str, str] | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
    cause: str | None = None,
) -> None:
    """EmulatorUnreachableError for the first emulator named in `env` that accepts no
    connection within `timeout_s`; nothing when none is named (the cloud). `cause`: what to
    tell the operator (default: a stale `*_EMULATOR_HOST` left by a stopped local stack)."""
    named = named_emulators(env)
    for var, address in named.items():
        why = probe(address, timeout_s)
        if why is not None:
            raise EmulatorUnreachableError(
                var, address, why, cause or STALE_ENV.format(names=" ".join(named))
            )
