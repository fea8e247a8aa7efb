"""Stand-in for PyChunkedGraph's ingest workload package (tests only)."""
