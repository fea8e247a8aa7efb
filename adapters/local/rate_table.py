"""The rate table's files on disk: the CSV and its source record, read and replaced whole
(docs/operating.md#the-rate-table). Both are written to temporary files first and renamed into
place, so a failed write leaves the old table."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from shared.money.pricing import RATES_FILE, RATES_SOURCE_FILE


def packaged_folder() -> Path:
    """The folder of the packaged table (`shared/`: what the functions ship with)."""
    import shared

    return Path(shared.__file__).parent


@dataclass(frozen=True)
class RateTableFiles:
    """The table under `folder` (`shared/` of the package, or a test's copy)."""

    folder: Path

    @property
    def table(self) -> Path:
        return self.folder / RATES_FILE

    @property
    def source(self) -> Path:
        return self.folder / RATES_SOURCE_FILE

    def read(self) -> tuple[str, str]:
        """The table's CSV text and its source record's text ("" when there is none)."""
        source = self.source.read_text("utf-8") if self.source.exists() else ""
        return self.table.read_text("utf-8"), source

    def write(self, table_csv: str, source_json: str) -> None:
        """Replace both files (each by rename; the table first)."""
        for path, text in ((self.table, table_csv), (self.source, source_json)):
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(text)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
