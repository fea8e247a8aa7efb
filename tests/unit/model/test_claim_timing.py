"""shared.model.claim_timing: renewal cadence and the same-lineage takeover window
(docs/zombies.md), table-driven."""

from __future__ import annotations

import pytest

from shared.model.claim_timing import (
    claim_poll_cap_s,
    renew_interval_s,
    retry_interval_s,
    takeover_after_s,
)

# expiry -> (renewal, retry, takeover window, poll cap)
CASES = [
    (1.2, 0.4, 0.06, 1.0, 0.1),
    (3.0, 1.0, 0.15, 2.5, 0.25),
    (9.0, 3.0, 0.45, 7.5, 0.75),
    (12.0, 4.0, 0.6, 10.0, 1.0),  # a chaos run's lock expiry
    (30.0, 10.0, 1.5, 22.0, 2.5),  # exactly at the renewal cap
    (180.0, 10.0, 10.0 / 3, 22.0, 2.5),  # job.lock_expiry_s's default, layer 2
    (11520.0, 10.0, 10.0 / 3, 22.0, 2.5),  # layer 8 with the default factor 2
]


@pytest.mark.parametrize("expiry, renew, retry, window, poll", CASES)
def test_cadence_and_window(expiry, renew, retry, window, poll):
    assert renew_interval_s(expiry) == pytest.approx(renew)
    assert retry_interval_s(expiry) == pytest.approx(retry)
    assert takeover_after_s(expiry) == pytest.approx(window)
    assert claim_poll_cap_s(expiry) == pytest.approx(poll)


@pytest.mark.parametrize("expiry", [0.5, 1.2, 3.0, 12.0, 29.9, 30.0, 30.1, 180.0, 1e6])
def test_a_live_claim_never_reaches_the_window_and_the_window_precedes_the_expiry(expiry):
    renew, window = renew_interval_s(expiry), takeover_after_s(expiry)
    # a live claimant renews at least twice within the window, with room for skew ...
    assert window >= 2 * renew + min(2.0, renew / 2) - 1e-9
    # ... and a dead one's claim is taken over before it expires (else no point)
    assert window <= expiry * 2.5 / 3 + 1e-9 < expiry
    # failed renewals are retried several times before the next renewal is due
    assert retry_interval_s(expiry) <= renew / 3 + 1e-9
    # a waiting worker polls at least twice within the slot between window and expiry
    assert claim_poll_cap_s(expiry) * 2 <= expiry - window + 1e-9
