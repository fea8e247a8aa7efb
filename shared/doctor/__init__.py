"""`pipeline doctor`: the project checked against everything a build needs (docs/doctor.md).

The pure part lives here: what a deployment is made of (`deployment`), the verdicts and the
exit-code rule (`verdicts`), and the checks, each a function from fetched facts to a verdict
and the fix (`checks`). Fetching the facts is the adapters' job (`adapters.doctor`).
"""
