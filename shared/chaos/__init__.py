"""The chaos plan and its verdicts."""
