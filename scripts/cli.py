"""The `pipeline` command: operator entry point (click). Commands live in scripts/commands/.

What a command raises is translated here, at the edge, to one message and an exit code by
`scripts.exits` (docs/cli.md#exit-codes): 2 for bad input, 3 for an unreachable service, 1
otherwise; Ctrl-C exits 130 and SIGTERM / SIGHUP 128 + the signal, at once and without a
traceback.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, NoReturn

import click

from adapters import wiring
from adapters.common.termination import leave_now, unwind_on_termination
from scripts import exits
from scripts.commands import (
    admin,
    alerts,
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
    rates,
    report,
    run,
    simulate,
    verify,
)

wiring.register_config_readers()  # load_config reads a precomputed volume's gs:// info


def _leave(code: int, message: str, interrupted: bool) -> NoReturn:
    if interrupted:  # past every `finally`: leave without the interpreter's shutdown
        leave_now(code, message)
    click.echo(message, err=True)
    sys.exit(code)


class PipelineGroup(click.Group):
    """The `pipeline` group: every error a command raises leaves through `scripts.exits`."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:  # fmt: skip
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.ClickException as e:  # `pipeline --bogus`: in the same form
            code, message = exits.outcome(e) or (e.exit_code, str(e))
            _leave(code, message, interrupted=False)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except BrokenPipeError:  # output piped into `head`: not an error
            sys.stderr.close()
            sys.exit(0)
        except BaseException as e:
            known = exits.outcome(e)
            if known is None:
                raise  # a bug: its traceback
            _leave(*known, interrupted=isinstance(e, KeyboardInterrupt))


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
    alerts,
    pods,
    costs,
    rates,
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
