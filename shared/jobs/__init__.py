"""What a Job is: layer spec, layer Job, setup Job, worker pod, Autopilot requests."""
