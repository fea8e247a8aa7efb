"""docs/cli.md's exit-code table is the CLI's mapping (scripts/exits.py), and every error
leaves in one form: the table is parsed from the page, each documented cause is raised from a
command of the real `pipeline` group, and its exit code and message are checked.

Ctrl-C and a SIGTERM leave without the interpreter's shutdown (`leave_now`), so those two are
raised in a subprocess.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from adapters.common.emulator_probe import EmulatorUnreachableError
from adapters.common.termination import Terminated
from scripts import exits
from scripts.cli import PipelineGroup, main

ROOT = Path(__file__).resolve().parents[3]
CLI_DOC = ROOT / "docs" / "cli.md"
DEMO = ROOT / "examples" / "demo" / "pipeline.yml"
SIGNAL_CODE = "128 + N"
INTERRUPTS = ("interrupted", "signal")


def documented() -> dict[str, str]:
    """cause -> code, from the table under `## Exit codes` in docs/cli.md."""
    section = CLI_DOC.read_text().split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| code | cause |"), rows[:1]
    table = {}
    for row in rows[1:]:
        code, cause = (cell.strip() for cell in row.strip("|").split("|")[:2])
        table[cause] = code
    return table


def mapped() -> dict[str, str]:
    """cause -> code, as scripts/exits.py has them."""
    out = {"done": str(exits.DONE)}
    for rule in exits.RULES:
        code = f"{rule.code} + N" if rule.plus_signal else str(rule.code)
        assert out.setdefault(rule.cause, code) == code, f"{rule.cause}: two codes"
    return out


def test_the_table_in_the_docs_is_the_mapping():
    assert documented() == mapped()


def an_error(cls: type[BaseException]) -> BaseException:
    """An instance of `cls` carrying a message (the Google clients' RetryError wants a cause
    too, Terminated its signal)."""
    if issubclass(cls, Terminated):
        return cls(signal.SIGTERM)
    if issubclass(cls, EmulatorUnreachableError):  # names the variable, address, why, fix
        return cls("FIRESTORE_EMULATOR_HOST", "127.0.0.1:1", "refused", "the message")
    try:
        return cls("the message")
    except TypeError:
        return cls("the message", None)  # type: ignore[call-arg]


ERRORS = [
    pytest.param(rule.cause, cls, id=f"{rule.cause}-{cls.__name__}")
    for rule in exits.RULES
    if rule.cause not in INTERRUPTS
    for cls in rule.errors
]


def _group_raising(error: BaseException) -> click.Group:
    """The `pipeline` group's class with one command, `boom`, that raises `error`."""

    @click.command("boom")
    def boom() -> None:
        raise error

    return PipelineGroup(commands={"boom": boom})


@pytest.mark.parametrize(("cause", "cls"), ERRORS)
def test_each_documented_cause_exits_with_its_documented_code(cause, cls):
    result = CliRunner().invoke(_group_raising(an_error(cls)), ["boom"])
    assert result.exit_code == int(documented()[cause]), result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "the message" in last, result.stderr
    assert "Error:" not in result.output and "Traceback" not in result.output


def test_an_unknown_error_is_a_bug_and_keeps_its_traceback():
    class Bug(Exception):
        pass

    result = CliRunner().invoke(_group_raising(Bug("oops")), ["boom"])
    assert result.exit_code == 1 and isinstance(result.exception, Bug)


@pytest.mark.parametrize(
    ("args", "cause", "said"),
    [
        (["validate", "-c", "missing.yml"], "bad input", "missing.yml: file not found"),
        (["locate", "-c", str(DEMO), "9", "0", "0", "0"], "bad input", "layers are 2..5"),
        (["locate", "-c", str(DEMO), "2", "0", "0"], "bad input", "takes 3 values"),
        (["--no-such-option"], "bad input", "No such option"),
        (["no-such-command"], "bad input", "No such command"),
    ],
)
def test_real_commands_follow_the_table_and_print_one_form(args, cause, said):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == int(documented()[cause]), result.output
    assert re.search(r"^error: .*" + re.escape(said), result.stderr, re.M), result.stderr
    assert "Error:" not in result.stderr


INTERRUPTED = """
import signal, sys, click
from adapters.common.termination import Terminated
from scripts.cli import PipelineGroup

@click.command()
def boom():
    raise Terminated(signal.SIGTERM) if sys.argv[1] == "signal" else KeyboardInterrupt()

PipelineGroup(commands={"boom": boom})(["boom"])
"""


@pytest.mark.parametrize(
    ("cause", "code", "said"),
    [("interrupted", 130, "interrupted"), ("signal", 128 + signal.SIGTERM, "stopped by SIGTERM")],
)
def test_an_interruption_exits_with_its_documented_code(cause, code, said):
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED, cause],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    documented_code = documented()[cause]
    if documented_code == SIGNAL_CODE:
        documented_code = str(128 + signal.SIGTERM)
    assert done.returncode == int(documented_code) == code, done.stderr
    assert done.stderr.strip() == said and "Traceback" not in done.stderr
