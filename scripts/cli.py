"""The `pipeline` command: operator entry point (click). Commands live in scripts/commands/.

Errors raised below are translated to a one-line message and an exit code here, at the edge:
2 for bad input (config, arguments), 3 for an unreachable dependency, 1 otherwise; Ctrl-C
exits 130 and SIGTERM / SIGHUP 128 + the signal, at once and without a traceback.
"""

from __future__ import annotations

import logging
import sys

import click

from adapters.google import info_reader  # noqa: F401 - load_config reads gs:// info
from adapters.local.emulator_probe import EmulatorUnreachableError
from adapters.local.emulators import EmulatorMissingError, EmulatorStartError
from adapters.local.termination import Terminated, leave_now, unwind_on_termination
from scripts.commands import (
    admin,
    apply,
    config,
    costs,
    demo,
    describe,
    doctor,
    grid,
    inspect,
    local,
    pods,
    report,
    run,
    simulate,
    verify,
)
from shared.config.config import ConfigError
from shared.ports.cluster import ClusterError, ClusterUnreachableError
from shared.ports.run_store import StaleStateError

# What the operator must fix (exit 2), what may pass (exit 3), what to retry (exit 1).
BAD_INPUT: tuple[type[BaseException], ...] = (
    ConfigError,
    ValueError,
    LookupError,
    EmulatorMissingError,
)
UNREACHABLE: tuple[type[BaseException], ...] = (
    ConnectionError,
    TimeoutError,
    ClusterUnreachableError,
    EmulatorStartError,
)
REFUSED: tuple[type[BaseException], ...] = (ClusterError,)
# The Google clients are in the `controller` extra: without them the commands that need no
# service still work, and none of these errors can be raised.
try:
    from google.api_core import exceptions as gexc

    from adapters.wiring import WiringError
except ImportError:
    pass
else:
    BAD_INPUT += (WiringError,)
    UNREACHABLE += (gexc.ServiceUnavailable, gexc.DeadlineExceeded, gexc.RetryError)
    REFUSED += (gexc.GoogleAPICallError,)


class PipelineGroup(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except BrokenPipeError:  # output piped into `head`: not an error
            sys.stderr.close()
            sys.exit(0)
        except Terminated as e:
            leave_now(e.exit_code, f"stopped by {e}")
        except KeyboardInterrupt:
            leave_now(130, "interrupted")
        except BAD_INPUT as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except EmulatorUnreachableError as e:  # its message says what to do
            click.echo(f"error: {e}", err=True)
            sys.exit(3)
        except UNREACHABLE as e:
            click.echo(
                f"error: cannot reach a service: {e}; is it running? (locally: `pipeline local "
                "up` in this folder, then run the command again)",
                err=True,
            )
            sys.exit(3)
        except StaleStateError as e:
            click.echo(f"error: {e}; run the command again", err=True)
            sys.exit(1)
        except REFUSED as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)


@click.group(cls=PipelineGroup)
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
def main(verbose: bool) -> None:
    """cave-pipeline: chunked-graph builds on GKE Autopilot, driven by events."""
    unwind_on_termination()  # a SIGTERM stops what a command started, then exits 143
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(message)s"
    )
    # Library warnings (e.g. the Bigtable client's "Connecting to Bigtable emulator") are
    # logged, and shown only with -v: they are not the operator's business.
    logging.captureWarnings(True)
    logging.getLogger("py.warnings").setLevel(logging.DEBUG if verbose else logging.ERROR)


# Building and running first, then looking into a run (debugging, costs), then housekeeping.
COMMAND_MODULES = (
    demo,
    grid,
    local,
    run,
    inspect,
    describe,
    pods,
    costs,
    report,
    admin,
    doctor,
    config,
    simulate,
    apply,
    verify,
)
for module in COMMAND_MODULES:
    for command in module.COMMANDS:
        main.add_command(command)

if __name__ == "__main__":
    main()
