"""The CLI's exit codes: which errors mean which cause, the code of each cause, and the one
form an error is printed in (`error: ...`), as docs/cli.md's exit-code table says.

`scripts.cli` translates what a command raises with `outcome()`, at the edge; nothing else
picks an exit code for an error. tests/unit/cli/test_exit_codes.py holds the table in
docs/cli.md to `RULES`, so the two cannot drift.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import click

from adapters.common.termination import Terminated
from adapters.local.emulators import EmulatorMissingError, EmulatorStartError
from adapters.wiring import EmulatorUnreachableError
from shared.config.config import ConfigError, ConfigSourceUnreachable
from shared.doctor.verdicts import PreflightFailedError
from shared.operate.operator_actions import ActionError
from shared.ports.cluster import ClusterError, ClusterUnreachableError
from shared.ports.price_catalog import CatalogUnavailableError
from shared.ports.run_store import StaleStateError

ERROR_PREFIX = "error: "
LOCAL_HINT = (
    "is it running? (locally: `pipeline local up` in this folder, then run the command again)"
)
LOGIN_HINT = (
    "run `gcloud auth application-default login` (the local stack needs no credentials: run "
    "the command in the folder of `pipeline local up`, without PIPELINE_PROJECT)"
)

# What the operator must fix (exit 2): the message names the field or the fix.
BAD_INPUT: tuple[type[BaseException], ...] = (
    ConfigError,
    ActionError,
    PreflightFailedError,
    click.UsageError,
    ValueError,
    LookupError,
    EmulatorMissingError,
)
# A service that did not answer (exit 3): it may pass.
UNREACHABLE: tuple[type[BaseException], ...] = (
    ConnectionError,
    TimeoutError,
    ClusterUnreachableError,
    EmulatorStartError,
)
# Google's credentials could not be had (exit 3, as `pipeline doctor` says of them).
NO_CREDENTIALS: tuple[type[BaseException], ...] = ()
# What was refused for a reason the message gives (exit 1).
REFUSED: tuple[type[BaseException], ...] = (ClusterError, click.ClickException)
# The Google clients are in the `controller` extra: without them the commands that need no
# service still work, and none of these errors can be raised.
try:
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as gauth

    from adapters.wiring import WiringError
except ImportError:
    pass
else:
    BAD_INPUT += (WiringError,)
    UNREACHABLE += (gexc.ServiceUnavailable, gexc.DeadlineExceeded, gexc.RetryError)
    NO_CREDENTIALS += (gauth.DefaultCredentialsError, gauth.RefreshError, gauth.TransportError)
    REFUSED += (gexc.GoogleAPICallError,)


@dataclass(frozen=True)
class ExitRule:
    """A cause of exit (`cause`, as docs/cli.md's table names it), the errors that mean it,
    its code (plus the signal's number where `plus_signal`) and how its message reads."""

    cause: str
    code: int
    errors: tuple[type[BaseException], ...]
    lead: str = ""  # before the error's text
    then: str = ""  # after it: what to do
    plus_signal: bool = False

    def exit_code(self, error: BaseException) -> int:
        return self.code + getattr(error, "signum", 0) if self.plus_signal else self.code


# First match wins: a ClusterUnreachableError is a ClusterError, a Terminated a
# KeyboardInterrupt, a click.UsageError a ClickException.
RULES: tuple[ExitRule, ...] = (
    ExitRule("signal", 128, (Terminated,), lead="stopped by ", plus_signal=True),
    ExitRule("interrupted", 130, (KeyboardInterrupt,), lead="interrupted"),
    # their messages say what to do
    ExitRule(
        "unreachable",
        3,
        (ConfigSourceUnreachable, EmulatorUnreachableError, CatalogUnavailableError),
    ),
    ExitRule("unreachable", 3, UNREACHABLE, lead="cannot reach a service: ", then=LOCAL_HINT),
    ExitRule("unreachable", 3, NO_CREDENTIALS, lead="no Google credentials: ", then=LOGIN_HINT),
    ExitRule("bad input", 2, BAD_INPUT),
    ExitRule("stale", 1, (StaleStateError,), then="run the command again"),
    ExitRule("failed", 1, REFUSED),
)
DONE = 0  # the command did what it was asked


def rule_for(error: BaseException) -> ExitRule | None:
    """The rule of `error`, or None (a bug: the CLI shows its traceback)."""
    return next((r for r in RULES if isinstance(error, r.errors)), None)


def error_line(message: str) -> str:
    """`message` in the one form the CLI prints an error in."""
    return f"{ERROR_PREFIX}{message}"


def outcome(error: BaseException) -> tuple[int, str] | None:
    """The exit code and the message of `error` (None: not a known error). Interruptions read
    `interrupted[: what to know]` and `stopped by SIGTERM`, the rest `error: ...`; a click
    error keeps click's usage lines above it."""
    rule = rule_for(error)
    if rule is None:
        return None
    code = rule.exit_code(error)
    if isinstance(error, Terminated):
        return code, f"{rule.lead}{error}"
    if isinstance(error, KeyboardInterrupt):
        return code, rule.lead + (f": {error}" if str(error) else "")
    if isinstance(error, click.ClickException):
        return code, _click_message(error)
    text = rule.lead + str(error)
    return code, error_line(f"{text}; {rule.then}" if rule.then else text)


def _click_message(error: click.ClickException) -> str:
    """What click prints for `error` (a usage error's usage and hint lines too), in our form."""
    out = io.StringIO()
    error.show(file=out)
    text = out.getvalue().rstrip("\n")
    theirs = f"Error: {error.format_message()}"
    head, found, tail = text.rpartition(theirs)
    return head + error_line(error.format_message()) + tail if found else text
