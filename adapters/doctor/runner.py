"""Runs the doctor's checks: every check's facts fetched in parallel (one daemon thread per
check), each judged by its pure check; a fetch that does not finish within the deadline, or
cannot reach its service, is reported unreachable rather than waited for. Daemon threads, not
a `ThreadPoolExecutor`: the interpreter joins an executor's threads at exit, so one hung call
(a gRPC read retrying for a minute) would hold the command long after it has answered."""

from __future__ import annotations

import concurrent.futures as futures
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from adapters.common.rest import ServiceUnreachable, UnexpectedAnswer
from shared.doctor.checks import CLOUD_UNREACHABLE_FIX, Check
from shared.doctor.deployment import Deployment
from shared.doctor.verdicts import CheckResult, Verdict

DEADLINE_S = 15.0


def run_checks(
    checks: list[Check],
    fetchers: Mapping[str, Callable[[], dict[str, Any]]],
    dep: Deployment,
    *,
    skip_reason: str = "does not apply here",
    deadline_s: float = DEADLINE_S,
    unreachable_fix: str = CLOUD_UNREACHABLE_FIX,
) -> list[CheckResult]:
    """The results of `checks` in their order; a check without a fetcher is skipped with
    `skip_reason`, one without an answer within `deadline_s` is unreachable with
    `unreachable_fix`."""
    pending = {c.id: _start(fetchers[c.id], c.id) for c in checks if c.id in fetchers}
    end = time.monotonic() + deadline_s
    results = []
    for check in checks:
        future = pending.get(check.id)
        if future is None:
            results.append(check.skipped(skip_reason))
            continue
        wait_s = max(0.0, end - time.monotonic())
        results.append(_judge(check, future, dep, wait_s, deadline_s, unreachable_fix))
    return results


def _start(fetch: Callable[[], dict[str, Any]], name: str) -> futures.Future:
    """`fetch()` running in a daemon thread; its outcome in the returned future."""
    future: futures.Future = futures.Future()

    def run() -> None:
        try:
            future.set_result(fetch())
        except BaseException as e:  # noqa: BLE001 - handed to the judge
            future.set_exception(e)

    threading.Thread(target=run, name=f"doctor-{name}", daemon=True).start()
    return future


def _judge(
    check: Check,
    future: futures.Future,
    dep: Deployment,
    wait_s: float,
    deadline_s: float,
    unreachable_fix: str,
) -> CheckResult:
    try:
        facts = future.result(timeout=wait_s)
    except futures.TimeoutError:
        return check.unreachable(f"no answer within {deadline_s:g} s", unreachable_fix)
    except ServiceUnreachable as e:
        return check.unreachable(str(e), unreachable_fix)
    except UnexpectedAnswer as e:
        return CheckResult(check.id, check.title, Verdict.FAIL, str(e), "see the service's message")
    except Exception as e:  # noqa: BLE001 - one broken check must not hide the others
        return CheckResult(
            check.id, check.title, Verdict.FAIL, f"{type(e).__name__}: {e}", "run with -v"
        )
    return check.result(facts, dep)
