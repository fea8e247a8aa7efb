"""The adapters' bottom room: helpers more than one room uses and that pick no adapter (the
REST session and its errors, the emulator probe, the CLI's and the local stack's signal
handling). It imports nothing else of `adapters` (pyproject's `adapter-rooms` contract)."""
