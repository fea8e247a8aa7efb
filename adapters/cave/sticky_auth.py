"""sticky_auth over HTTP: the `CaveAuth` port with a `requests` session
(docs/setup-passes.md#cave-registration)."""

from __future__ import annotations

from typing import Any

from shared.ports.cave_auth import Answer, CaveRegistration, CaveUnreachableError

TIMEOUT_S = 15.0  # the predecessor's and PCGL2Cache's


class StickyAuth:
    """Registers through `session` (a `requests.Session`)."""

    def __init__(self, session: Any, timeout: float = TIMEOUT_S) -> None:
        self.session, self.timeout = session, timeout

    def register(self, reg: CaveRegistration, token: str) -> Answer:
        headers = {"Authorization": f"Bearer {token}"}
        try:
            reply = self.session.post(reg.url, headers=headers, timeout=self.timeout)
        except Exception as e:  # noqa: BLE001 - requests' DNS, refused, TLS, timeout
            raise CaveUnreachableError(f"{type(e).__name__}: {str(e)[:200]}") from None
        text = reply.text
        if reply.status_code != 422:
            return Answer(reply.status_code, text)
        try:  # already mapped: to which dataset? (a JSON string, middle_auth's jsonify)
            lookup = self.session.get(reg.lookup_url, headers=headers, timeout=self.timeout)
            mapped = str(lookup.json()) if lookup.status_code == 200 else ""
        except Exception:  # noqa: BLE001 - the 422 stands; the alert says it was not read
            mapped = ""
        return Answer(422, text, mapped)
