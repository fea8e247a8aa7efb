"""What a run, a stage, a layer, a batch and a chunk are, and the worker contract."""
