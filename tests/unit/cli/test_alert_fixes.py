"""The first command an alert names (shared.control.alert_severity.DEFAULT_FIXES) is a
`pipeline` command that takes the arguments it is given: parsed by the CLI itself, not run."""

from __future__ import annotations

import shlex

import click
import pytest

from scripts.cli import main
from shared.control.alert_severity import DEFAULT_FIXES


@pytest.mark.parametrize("kind", sorted(DEFAULT_FIXES))
def test_the_default_fix_parses_as_a_command(kind):
    words = shlex.split(DEFAULT_FIXES[kind].format(run="r1", stage="ingest", layer=2))
    if words[0] != "pipeline":
        assert words[:2] == ["gcloud", "pubsub"], words
        return
    with click.Context(main) as ctx:
        command = main.get_command(ctx, words[1])
        assert command is not None, f"no command `pipeline {words[1]}`"
        command.make_context(words[1], words[2:], parent=ctx)  # raises on a wrong arity
