"""Which table a Bigtable error says is missing.

A missing table reaches a worker as `google.api_core.exceptions.NotFound` ("404 table
"projects/P/instances/I/tables/T" not found"), raised straight from a read or a single
mutation, or buried in kvdbclient's bulk-write error: a `KVDBClientError` caused by a
`MutationsExceptionGroup` whose entries are caused by the NotFound. The worker must see it
either way (a missing table is fatal, not a retry) and name the table (it is often not the
graph's: a pass writes a table of its own).
"""

from __future__ import annotations

import re

from google.api_core.exceptions import NotFound

_TABLE = re.compile(r"tables/([A-Za-z0-9_.\-]+)")


def missing_table(exc: BaseException) -> str | None:
    """The table a NotFound in `exc`, its causes or its group's members names; "" for a
    NotFound naming none (e.g. the instance's); None when no NotFound is there."""
    pending: list[BaseException] = [exc]
    seen: set[int] = set()
    while pending:
        e = pending.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, NotFound):
            found = _TABLE.search(str(e))
            return found.group(1) if found else ""
        pending += [x for x in (e.__cause__, e.__context__) if x is not None]
        if isinstance(e, BaseExceptionGroup):
            pending += list(e.exceptions)
    return None
