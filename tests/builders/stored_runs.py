"""A demo run stored in the Firestore emulator, for the store and controller contract tests."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo" / "pipeline.yml"
NOW = datetime(2026, 1, 1, tzinfo=UTC)  # the run's creation, and the controllers' clock
