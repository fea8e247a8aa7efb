"""The port to a price catalog: the SKUs of one service, every page of them
(adapters.google.billing_catalog: the Cloud Billing Catalog API). Pure: the port and its error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol


class CatalogUnavailableError(RuntimeError):
    """The catalog could not be read (unreachable, refused, or an answer not in its shape);
    the message says what was tried and what to check."""


class PriceCatalog(Protocol):
    """Reads a service's SKUs."""

    def skus(self, service_id: str) -> Iterator[dict[str, Any]]:
        """Every SKU of `service_id` in the catalog's own shape (a `Sku` object), across
        all pages; CatalogUnavailableError when a page cannot be read."""
        ...
