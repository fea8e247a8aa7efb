"""The interfaces the core reaches the world through (the adapters implement them)."""
