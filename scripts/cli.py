"""The `pipeline` command: operator entry point (click). Subcommands live in cmd_*.py.

Errors raised below are translated to a one-line message and an exit code here, at the edge:
2 for bad input (config, arguments), 3 for an unreachable dependency, 1 otherwise.
"""

from __future__ import annotations

import logging
import sys

import click
from google.api_core import exceptions as gexc

from scripts.commands import admin, costs, demo, grid, inspect, local, pods, run, simulate
from shared.adapters.local.emulators import EmulatorMissingError, EmulatorStartError
from shared.adapters.wiring import WiringError
from shared.cluster import ClusterError, ClusterUnreachableError
from shared.config import ConfigError
from shared.run_store import StaleStateError

# What the operator must fix (exit 2), what may pass (exit 3), what to retry (exit 1).
BAD_INPUT = (ConfigError, ValueError, LookupError, WiringError, EmulatorMissingError)
UNREACHABLE = (
    ConnectionError,
    TimeoutError,
    ClusterUnreachableError,
    EmulatorStartError,
    gexc.ServiceUnavailable,
    gexc.DeadlineExceeded,
    gexc.RetryError,
)


class PipelineGroup(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except BrokenPipeError:  # output piped into `head`: not an error
            sys.stderr.close()
            sys.exit(0)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except BAD_INPUT as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except UNREACHABLE as e:
            click.echo(f"error: cannot reach a service (is it running?): {e}", err=True)
            sys.exit(3)
        except StaleStateError as e:
            click.echo(f"error: {e}; run the command again", err=True)
            sys.exit(1)
        except (ClusterError, gexc.GoogleAPICallError) as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)


@click.group(cls=PipelineGroup)
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
def main(verbose: bool) -> None:
    """cave-pipeline: chunked-graph builds on GKE Autopilot, driven by events."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(message)s"
    )


# Building and running first, then looking into a run (debugging, costs), then housekeeping.
COMMAND_MODULES = (demo, grid, local, run, inspect, pods, costs, admin, simulate)
for module in COMMAND_MODULES:
    module.register(main)

if __name__ == "__main__":
    main()
