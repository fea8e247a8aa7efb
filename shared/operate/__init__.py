"""What operators do: actions, mid-graph starts, config versions."""
