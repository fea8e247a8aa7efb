"""Build simulation: the real decision against a simulated Autopilot cluster. Pure package."""
