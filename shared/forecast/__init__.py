"""When a run finishes and what it costs: the closed form and the simulator."""
