"""The demo workload: one plugin package, the way PyChunkedGraph is one.

A seeded synthetic segmentation (`volume`), the per-chunk algorithms the workers run
(`ingest`, `l2cache`, `meshing`, named in the config as `demo.<stage>:process_chunk`), their
Bigtable rows (`graph_rows`, `stage_rows`) and table I/O (`graph_table`, `stage_tables`), the
oracles that check a finished build against a direct computation (`oracle`, `oracle_stages`,
`oracles`) and the demo's auto-approver. Production code never imports this package.
"""
