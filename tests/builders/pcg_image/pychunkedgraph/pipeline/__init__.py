"""Stand-in for PyChunkedGraph's pipeline package (tests only)."""
