"""The controller and its triggers: events, ticks, alerts, dead letters."""
