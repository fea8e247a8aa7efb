"""Which table a Bigtable error says is missing (adapters.bigtable.not_found): a NotFound raised
straight, or buried in kvdbclient's bulk-write error the way a pass's write to a table that
was never created fails, is found and its table named; other errors are not."""

from __future__ import annotations

from google.api_core.exceptions import DeadlineExceeded, NotFound
from google.cloud.bigtable.data.exceptions import FailedMutationEntryError, MutationsExceptionGroup
from google.cloud.bigtable.data.mutations import RowMutationEntry, SetCell
from kvdbclient.exceptions import KVDBClientError

from adapters.bigtable.not_found import missing_table

GONE = NotFound('table "projects/p/instances/i/tables/demo-l2cache" not found')


def _bulk_write_error(cause: Exception) -> KVDBClientError:
    """kvdbclient's bulk write as it fails: KVDBClientError from the batcher's group."""
    entry = RowMutationEntry(b"row", [SetCell("0", b"c", b"v")])
    group = MutationsExceptionGroup([FailedMutationEntryError(0, entry, cause)], 1)
    try:
        try:
            raise group
        except MutationsExceptionGroup as e:
            raise KVDBClientError("Bulk write failed: 1 failed entries from 1 attempted.") from e
    except KVDBClientError as e:
        return e


def test_a_not_found_names_its_table():
    assert missing_table(GONE) == "demo-l2cache"


def test_a_bulk_writes_not_found_is_found_under_the_group():
    assert missing_table(_bulk_write_error(GONE)) == "demo-l2cache"


def test_a_not_found_naming_no_table_is_an_empty_name():
    assert missing_table(NotFound("instance i not found")) == ""


def test_other_errors_are_not_a_missing_table():
    assert missing_table(_bulk_write_error(DeadlineExceeded("slow"))) is None
    assert missing_table(ValueError("bad supervoxel")) is None
