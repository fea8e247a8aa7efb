"""CAVE's services (sticky_auth)."""
