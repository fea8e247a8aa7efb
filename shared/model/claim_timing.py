"""When our worker renews a chunk claim, and when a claim of its own Job index counts as
abandoned (docs/zombies.md). Pure module.

A claim of an earlier attempt of the same Job index (same lineage, ``worker.claim_tokens``)
is taken over before it expires, but only once its newest lock cell is older than
:func:`takeover_after_s`: two renewal intervals plus an allowance for clock skew. A live
claimant renews every :func:`renew_interval_s`, so its cell never gets that old; a *zombie*
(a pod gone from the API whose process still runs) therefore cannot take over the live claim
of its own replacement, while a dead attempt's claim is taken over within that window instead
of a whole lock expiry.

The renewal interval is a third of the lock expiry, at most :data:`MAX_RENEW_S`, so the
window stays short at the upper layers, whose lock expiry grows with the layer
(``job.lock_expiry_factor``).
"""

from __future__ import annotations

__all__ = [
    "MAX_RENEW_S",
    "RENEWALS_PER_EXPIRY",
    "RETRIES_PER_EXPIRY",
    "SKEW_ALLOWANCE_S",
    "TAKEOVER_RENEWALS",
    "claim_poll_cap_s",
    "renew_interval_s",
    "retry_interval_s",
    "takeover_after_s",
]

#: A live claim is renewed at least this many times per lock expiry ...
RENEWALS_PER_EXPIRY = 3
#: ... and at least this often (seconds), whatever the expiry: this bounds the takeover window.
MAX_RENEW_S = 10.0
#: After a failed renewal, retry at least this many times per expiry ...
RETRIES_PER_EXPIRY = 20
#: ... and at least three times per renewal interval.
RETRIES_PER_RENEWAL = 3
#: A same-lineage claim is abandoned once it missed this many renewals ...
TAKEOVER_RENEWALS = 2
#: ... plus this much (seconds) for the clocks of the writer and the taker disagreeing: lock
#: cells carry the writer's clock, the taker compares them with its own (docs/zombies.md).
SKEW_ALLOWANCE_S = 2.0
#: A worker waiting for a held chunk polls at least this many times per renewal interval, so
#: it meets the window between "abandoned" and "expired".
POLLS_PER_RENEWAL = 4
_MAX_POLL_S = 5.0


def renew_interval_s(expiry_s: float) -> float:
    """How often a held claim is renewed: a third of the lock expiry, at most 10 s."""
    return min(expiry_s / RENEWALS_PER_EXPIRY, MAX_RENEW_S)


def retry_interval_s(expiry_s: float) -> float:
    """How soon a failed renewal is retried: a twentieth of the expiry, at most a third of
    the renewal interval."""
    return min(expiry_s / RETRIES_PER_EXPIRY, renew_interval_s(expiry_s) / RETRIES_PER_RENEWAL)


def takeover_after_s(expiry_s: float) -> float:
    """How old the newest lock cell of a same-lineage claim must be before it is taken over:
    two renewal intervals plus the skew allowance (at most half an interval, so the window
    stays under the expiry: 2.5 / 3 of it at most)."""
    renew = renew_interval_s(expiry_s)
    return TAKEOVER_RENEWALS * renew + min(SKEW_ALLOWANCE_S, renew / 2)


def claim_poll_cap_s(expiry_s: float) -> float:
    """The longest pause between two claims of a held chunk: a quarter of the renewal
    interval, at most 5 s."""
    return min(_MAX_POLL_S, renew_interval_s(expiry_s) / POLLS_PER_RENEWAL)
