"""The config: models, the predecessor's shape, watershed size, stage selection."""
