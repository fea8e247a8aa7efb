"""worker.chaos_points: pod-level faults strike mid-write (rows in the table, no done marker),
chunk-level faults at the chunk's start, and a zombie goes on at once, ending at its next chunk."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from google.cloud.bigtable.data.mutations import DeleteAllFromRow, RowMutationEntry

from adapters import chaos_mailbox as mb
from worker import chaos_points


class Client:
    """The table client's write, as the harness hands it to a plugin."""

    def __init__(self) -> None:
        self.written: list[object] = []

    def write(self, rows):
        self.written.extend(rows)


class Log:
    def warning(self, *a, **k):
        pass

    def flush(self):
        pass


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv(mb.CHAOS_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("HOSTNAME", "pod-a")
    monkeypatch.setattr(chaos_points, "_zombie", False)
    return mb.mailbox(tmp_path)


def _ctx(client, cancelled=None):
    return SimpleNamespace(
        stage="ingest", layer=2, chunk_id=77, token=5, previous_token=None,
        client=client, cancelled=cancelled or threading.Event(),
    )  # fmt: skip


def _write_in_thread(client, rows):
    t = threading.Thread(target=client.write, args=(rows,), daemon=True)
    t.start()
    return t


def _wait_held(root):
    for _ in range(200):
        if mb.held(root):
            return mb.held(root)[0]
        threading.Event().wait(0.02)
    raise AssertionError("the worker never held")


def test_a_pod_fault_holds_after_rows_are_written_not_before(root):
    mb.arm(root, "00000-pod_sigkill", "pod_sigkill")
    mb.arm(root, "00001-chunk_transient", "chunk_transient")
    client = chaos_points.client_for(Client())  # chaos on: the plugin's client
    ctx = _ctx(client)
    with pytest.raises(chaos_points.ChaosTransientError):  # the chunk-level fault, at the start
        chaos_points.before_plugin(ctx, None, Log())
    assert mb.still_armed(root) == ["00000-pod_sigkill"]  # not taken at the chunk's start
    chaos_points.before_plugin(ctx, None, Log())
    client.write([RowMutationEntry(b"1", [DeleteAllFromRow()])])  # a clean-up: no hold
    t = _write_in_thread(client, ["row-1", "row-2"])
    held = _wait_held(root)
    assert client.written[-2:] == ["row-1", "row-2"]  # written before the hold
    assert (held["kind"], held["chunk_id"], held["token"], held["layer"]) == (
        "pod_sigkill", 77, 5, 2,
    )  # fmt: skip
    assert t.is_alive()
    mb.mark_handled(root, held["fault_id"], release=True)
    t.join(5)
    assert not t.is_alive()
    chaos_points.after_plugin(ctx)
    client.write(["row-3"])  # disarmed after the chunk: written, not recorded
    assert client.written[-1] == "row-3"
    events = [r["event"] for r in mb.audit_records(root)]
    assert events == ["begun", "begun", "wrote", "wrote", "returned"]


def test_without_chaos_the_plugin_gets_the_client_itself(monkeypatch):
    monkeypatch.delenv(mb.CHAOS_DIR_ENV, raising=False)
    raw = Client()
    assert chaos_points.client_for(raw) is raw


def test_a_zombie_goes_on_at_once_with_its_claim_and_ends_at_its_next_chunk(root):
    """A zombie does not know it is one: released, it goes on with its chunk at once, its
    claim still its own (the replacement may not take over a live claim, docs/zombies.md)."""
    mb.arm(root, "00000-node_lost", "node_lost", zombie=True)
    client, cancelled = chaos_points.client_for(Client()), threading.Event()
    ctx = _ctx(client, cancelled)
    chaos_points.before_plugin(ctx, None, Log())
    t = _write_in_thread(client, ["row-1"])
    held = _wait_held(root)
    mb.mark_handled(root, held["fault_id"], release=True)  # the node is lost, the process lives
    t.join(5)
    assert not t.is_alive()  # not waiting for a takeover
    resumed = [r for r in mb.audit_records(root) if r["event"] == "zombie_resumed"]
    assert [r["fenced"] for r in resumed] == [False]
    with pytest.raises(SystemExit):  # its next chunk ends the zombie
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(chaos_points.os, "_exit", lambda code: (_ for _ in ()).throw(SystemExit))
            chaos_points.before_plugin(_ctx(chaos_points.client_for(Client())), None, Log())


def test_a_hung_worker_stops_mid_write_and_stays(root):
    mb.arm(root, "00000-pod_hung", "pod_hung")
    client = chaos_points.client_for(Client())  # chaos on: the plugin's client
    chaos_points.before_plugin(_ctx(client), None, Log())
    t = _write_in_thread(client, ["row-1"])
    for _ in range(200):
        if any(r["event"] == "hung" for r in mb.audit_records(root)):
            break
        threading.Event().wait(0.02)
    assert client.written == ["row-1"]  # it wrote, then made no progress
    t.join(0.3)
    assert t.is_alive() and mb.held(root) == []  # no injector involved: it just hangs
    assert [f["kind"] for f in mb.taken(root)] == ["pod_hung"]
