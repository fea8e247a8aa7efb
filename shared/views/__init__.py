"""What operators read: progress, timeline, fleet."""
