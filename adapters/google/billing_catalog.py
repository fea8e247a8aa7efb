"""The Cloud Billing Catalog API's SKUs of a service, every page (`services.skus.list`,
paginated by `nextPageToken`), for `pipeline rates update` (docs/operating.md#the-rate-table).

REST through an injected session, as the doctor and Cloud Monitoring are called: a google-auth
`AuthorizedSession` (Application Default Credentials) or, with an API key, a plain
`requests.Session`; tests point `root` at a local server answering pages in the published
shape (tests/fixtures/cloudbilling/).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

from adapters.common.rest import HttpSession, RestApi, ServiceUnreachable, UnexpectedAnswer
from shared.doctor.facts import Denied
from shared.ports.price_catalog import CatalogUnavailableError

ROOT = "https://cloudbilling.googleapis.com/v1"
PAGE_SIZE = 5000  # the API's maximum: Kubernetes Engine's SKUs are a few pages
MAX_PAGES = 200  # a token that never ends is the API's fault: stop, say so
TIMEOUT_S = 30.0


class BillingCatalog:
    """The `PriceCatalog` port on the Cloud Billing Catalog API."""

    def __init__(
        self, session: HttpSession, root: str = ROOT, api_key: str = "", timeout: float = TIMEOUT_S
    ) -> None:
        self.api, self.root, self.api_key = RestApi(session, timeout), root.rstrip("/"), api_key

    def skus(self, service_id: str) -> Iterator[dict[str, Any]]:
        """Every SKU of `service_id`, page after page; CatalogUnavailableError names the page
        that could not be read and why."""
        token = ""
        for page in range(1, MAX_PAGES + 1):
            params: dict[str, Any] = {"pageSize": PAGE_SIZE}
            if token:
                params["pageToken"] = token
            if self.api_key:
                params["key"] = self.api_key
            url = f"{self.root}/services/{service_id}/skus?{urlencode(params)}"
            shown = url.split("?")[0] + f" (page {page})"  # never print the key
            try:
                body = self.api.resource(url)
            except (ServiceUnreachable, UnexpectedAnswer) as e:
                raise CatalogUnavailableError(
                    f"{shown}: {str(e).replace(self.api_key, '***') if self.api_key else e}"
                ) from None
            if body is None:
                raise CatalogUnavailableError(
                    f"{shown}: HTTP 404: no service {service_id} in the catalog"
                )
            if isinstance(body, Denied):
                raise CatalogUnavailableError(
                    f"{shown}: HTTP 403 {body.message}; enable the Cloud Billing API "
                    "(cloudbilling.googleapis.com) in the credentials' project, or pass an "
                    "API key (--api-key / GCP_BILLING_API_KEY)"
                )
            if not isinstance(body, dict) or not isinstance(body.get("skus", []), list):
                raise CatalogUnavailableError(f"{shown}: the answer is no ListSkusResponse")
            yield from body.get("skus", [])
            token = str(body.get("nextPageToken") or "")
            if not token:
                return
        raise CatalogUnavailableError(
            f"{self.root}/services/{service_id}/skus: still a nextPageToken after {MAX_PAGES} pages"
        )
