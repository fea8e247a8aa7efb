"""Output that is not a terminal (`pipeline demo > log`, `pipeline config import | less`) is
never cut: at 80 columns every figure, key and word of a table is whole (tables wrap by cell
or grow past the width), and a live view's last frame ends its line, so the next line does
not run into it. On a terminal too narrow for a table, `fit` falls back to plain lines."""

from __future__ import annotations

import io
import re
import shutil
from collections import Counter
from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console
from rich.text import Text

from scripts.cli import main
from scripts.commands.config import import_files, notes_table
from scripts.commands.costs import costs_table
from scripts.cost_report import cost_report
from scripts.views.status import status_view
from scripts.views.terminal import console, fit, live
from shared.config.config_files import load_config
from shared.reconcile.build_plan import new_run
from tests.builders.progress_rows import T0, big_run

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "examples" / "demo" / "pipeline.yml"
PREDECESSOR = REPO / "examples" / "predecessor"


def words(text: str) -> Counter[str]:
    """The words, figures and identifiers of a rendering (box drawing, rules, separators and
    ellipses left out): a cut one changes them."""
    return Counter(re.findall(r"[\w.\-/%$]+", text))


def reference(renderable) -> str:  # noqa: ANN001 - anything rich prints
    """`renderable` on a screen wide enough for all of it."""
    out = Console(width=1000, record=True, color_system=None, file=io.StringIO())
    out.print(renderable)
    return out.export_text()


def piped(capsys, renderable, width: int = 80) -> str:  # noqa: ANN001
    """`renderable` as a command prints it with stdout not a terminal (pytest captures it)."""
    console(width).print(renderable)
    return capsys.readouterr().out


def test_the_status_view_piped_at_80_columns_keeps_every_figure_whole(capsys):
    progress = big_run(top=16, running=6, forecast=True)[1]
    out = piped(capsys, status_view(progress))
    assert words(out) == words(reference(status_view(progress)))
    for figure in ("4.1k/4.1k", "l2cache-L2", "meshing-L2", "ingest-L6", "500/512"):
        assert figure in out, figure


def test_the_costs_table_piped_at_80_columns_keeps_every_figure_whole(capsys):
    run = new_run(load_config(DEMO), "r-piped", ["ingest", "l2cache", "meshing"], "auto", T0)
    for ls in run.layers.values():
        ls.phase, ls.timing.submitted_at = "succeeded", T0
        ls.timing.finished_at = T0 + timedelta(minutes=3)
        ls.pods.succeeded, ls.pods.cpu_seconds, ls.pods.memory_gib_seconds = 16, 400.0, 800.0
    report = cost_report(run, T0 + timedelta(minutes=5))
    assert words(piped(capsys, costs_table(report))) == words(reference(costs_table(report)))


def test_a_piped_live_view_ends_its_line_before_the_next(capsys):
    out = console(80)
    live(lambda: Text("right-size ingest-L2: costs 0.0002 more"), False, 0, out, until=lambda: True)
    out.print("oracle agrees")
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "right-size ingest-L2: costs 0.0002 more",
        "oracle agrees",
    ]


def _notes(tmp_path: Path):  # noqa: ANN202 - the mapping's notes
    for name in ("pipeline.yml", "dataset.yml"):
        shutil.copy(PREDECESSOR / name, tmp_path / name)
    if (PREDECESSOR / "watershed").exists():
        shutil.copytree(PREDECESSOR / "watershed", tmp_path / "watershed")
    return import_files(tmp_path / "pipeline.yml", None, True)[2]


def test_the_notes_piped_at_80_columns_break_no_identifier(tmp_path, capsys):
    notes = _notes(tmp_path)
    out = console(80)
    out.print(fit(notes_table(notes), out))
    assert words(capsys.readouterr().out) == words(reference(notes_table(notes)))


def test_config_import_piped_breaks_no_identifier(tmp_path):
    notes = _notes(tmp_path)
    result = CliRunner().invoke(
        main, ["config", "import", str(tmp_path / "pipeline.yml"), "--force"], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    assert words(result.output) >= words(reference(notes_table(notes)))
    for note in notes:
        for key in (note.old_key, note.new_key):
            assert all(word in result.output for word in key.split()), key


def test_config_import_on_a_narrow_terminal_falls_back_to_plain_lines(tmp_path):
    notes = _notes(tmp_path)
    screen = Console(width=90, force_terminal=True, color_system=None, record=True)
    screen.file = io.StringIO()
    screen.print(fit(notes_table(notes), screen))
    text = screen.export_text()
    assert "┃" not in text and "old key: " in text  # not the table: one line per note
    assert words(text) >= words(reference(notes_table(notes)))  # every word whole
    wide = Console(width=400, force_terminal=True, color_system=None, record=True)
    wide.file = io.StringIO()
    wide.print(fit(notes_table(notes), wide))
    assert "┃" in wide.export_text()  # room enough: the table
