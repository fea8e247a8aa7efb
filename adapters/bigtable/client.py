"""Opening and closing kvdbclient clients of a graph table (re-exported by
``adapters.bigtable.chunk_ledger``)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from google.api_core.exceptions import AlreadyExists
from kvdbclient import BigTableClient, BigTableConfig

__all__ = [
    "DEFAULT_TABLE_VERSION",
    "close_bigtable_client",
    "ensure_table",
    "open_bigtable_client",
]

log = logging.getLogger(__name__)

#: Written as the table version by ``open_bigtable_client(create=True)`` unless told otherwise.
DEFAULT_TABLE_VERSION = "cave-pipeline"


def open_bigtable_client(
    table_id: str,
    project: str,
    instance: str,
    lock_expiry: timedelta,
    create: bool = False,
    *,
    meta: Any = None,
    version: str = DEFAULT_TABLE_VERSION,
) -> BigTableClient:
    """Build a kvdbclient ``BigTableClient`` for ``table_id`` with ``lock_expiry``.

    With ``create=True`` the table is created with kvdbclient's default column families (and
    ``meta``/``version`` written) unless it exists already. Honors ``BIGTABLE_EMULATOR_HOST``.
    Close the client with :func:`close_bigtable_client` (or ``client.close()``).
    """
    config = BigTableConfig(PROJECT=project, INSTANCE=instance, ADMIN=True, READ_ONLY=False)
    if create:
        creator = BigTableClient(table_id, config, lock_expiry=lock_expiry)
        try:
            creator.create_table(meta, version)
        except ValueError as exc:  # kvdbclient: "<table> already exists."
            if "already exists" not in str(exc):
                raise
        except AlreadyExists:  # lost a race with another creator
            pass
        finally:
            close_bigtable_client(creator)
    return BigTableClient(table_id, config, lock_expiry=lock_expiry)


def ensure_table(table_id: str, project: str, instance: str) -> None:
    """Create a graph table (kvdbclient's column families) unless it exists: the `setup`
    step, which every Job of the graph needs before its first claim."""
    close_bigtable_client(
        open_bigtable_client(table_id, project, instance, timedelta(seconds=60), create=True)
    )


def close_bigtable_client(client: BigTableClient) -> None:
    """Close the data client and, if kvdbclient created one, its admin client (which
    ``client.close()`` leaves open)."""
    client.close()
    admin_table = getattr(client, "_Client__admin_table", None)
    if admin_table is not None:
        try:
            admin_table._instance._client.close()
        except Exception:  # best effort
            log.debug("closing the Bigtable admin client failed", exc_info=True)
