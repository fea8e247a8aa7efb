"""What a run costs: Autopilot pricing and the costs of recorded usage."""
