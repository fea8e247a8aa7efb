"""Stand-in for PyChunkedGraph (tests only): see tests/builders/pcg_image/README.md."""
