"""`pipeline config import`: an operator's predecessor-style files rewritten in the new shape.

`load_config` already reads the predecessor's keys (shared/config/config_compat.py); this writes the
mapped files for operators who want to keep the new shape, checks they load as written, and
prints every change of meaning as one table (old key, old meaning, new key, effect).
"""

from __future__ import annotations

from pathlib import Path

import click
import yaml
from rich.table import Table

from scripts.views.terminal import console, fit
from shared.config.config import ConfigError
from shared.config.config_compat import CompatError, Note, map_dataset, map_pipeline
from shared.config.config_files import dataset_key, load_config, meaning_notes, read_yaml


def _new_name(path: Path) -> Path:
    return path.with_name(f"{path.stem}.new{path.suffix}")


def output_paths(old: Path, old_dataset: Path, out: Path | None) -> tuple[Path, Path]:
    """Where the new pipeline and dataset files go: beside the old ones with `.new` before
    the suffix, or, with `-o FILE`, FILE and FILE's name with `.dataset` before the suffix
    (so the files of an earlier import without -o are never in the way)."""
    if out is None:
        return _new_name(old), _new_name(old_dataset)
    return out, out.with_name(f"{out.stem}.dataset{out.suffix or '.yml'}")


def _refuse_overwrite(pipeline: Path, dataset: Path, named: bool) -> None:
    """ConfigError naming an output that exists, why it is written, and the flag that
    overwrites it (and, for the default names, -o)."""
    if named:
        whys = ("named by -o", f"the dataset file written beside -o {pipeline}")
        way_out = ""
    else:
        whys = ("the default output name", "the default output name")
        way_out = ", or -o FILE to write FILE and FILE's dataset file instead"
    for path, why in zip((pipeline, dataset), whys, strict=True):
        if path.exists():
            raise ConfigError(f"{path}: exists ({why}); pass --force to overwrite it{way_out}")


def import_files(old: Path, out: Path | None, force: bool) -> tuple[Path, Path, list[Note]]:
    """Write `old` (and its dataset file) in the new shape; returns both paths and the notes
    (the mapping's, then what the loaded files mean that differs from how they read).

    The new dataset file is written next to the new pipeline file (`output_paths`), so
    relative paths in it (a local watershed) resolve as before when both stay beside the old
    files (the default). Files that exist are refused unless `force`.
    """
    try:
        pipeline, notes = map_pipeline(read_yaml(old))
    except CompatError as e:
        raise ConfigError(f"{old}: {e}") from None
    named = str(pipeline.get("dataset") or "dataset.yml")
    old_dataset = old.parent / named
    dataset, ds_notes = map_dataset(read_yaml(old_dataset, dataset_key(named, old)))
    named = out is not None
    out, new_dataset = output_paths(old, old_dataset, out)
    if not force:
        _refuse_overwrite(out, new_dataset, named)
    pipeline["dataset"] = new_dataset.name
    out.parent.mkdir(parents=True, exist_ok=True)
    header = f"# Imported from {old} by `pipeline config import`.\n"
    out.write_text(header + yaml.safe_dump(pipeline, sort_keys=False))
    new_dataset.write_text(header + yaml.safe_dump(dataset, sort_keys=False))
    cfg = load_config(out)  # the written files must load as they are, with nothing to map
    if cfg.compat_notes:
        raise ConfigError(f"{out}: still needs mapping: {'; '.join(cfg.compat_notes)}")
    return out, new_dataset, [*notes, *ds_notes, *meaning_notes(cfg.env, cfg.ds)]


def notes_table(notes: list[Note]) -> Table:
    """The changes of meaning, one row each: old key, old meaning, new key, effect (printed
    through `fit`: cells wrap by words, never inside an identifier)."""
    table = Table(title="changes of meaning", title_justify="left", show_lines=False)
    for name in ("old key", "old meaning", "new key", "effect"):
        table.add_column(name)
    for note in notes:
        table.add_row(note.old_key, note.old_meaning, note.new_key, note.effect)
    return table


@click.group("config")
def config_group() -> None:
    """Configuration files: import the predecessor's."""


@config_group.command("import")
@click.argument("old_pipeline", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The new pipeline file; its dataset file goes beside it, named FILE with .dataset "
    "before the suffix. Default: OLD_PIPELINE and its dataset file with .new before the suffix.",
)
@click.option("--force", is_flag=True, help="Overwrite the output files if they exist.")
def import_(old_pipeline: Path, out: Path | None, force: bool) -> None:
    """Write OLD_PIPELINE (predecessor's shape) and its dataset file in the new shape, and
    print every change of meaning as one table."""
    new, dataset, notes = import_files(old_pipeline, out, force)
    if notes:
        out = console()
        out.print(fit(notes_table(notes), out))
    click.echo(f"wrote {new} and {dataset} ({len(notes)} changes); both load as written")


COMMANDS = (config_group,)
