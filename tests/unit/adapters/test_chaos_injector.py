"""The local chaos injector's fault mechanics that need no stack: the API outage's dispatch, the
Pub/Sub fault hook, the function-host killer and the worker mailbox."""

from __future__ import annotations

import threading
import time

import pytest

from adapters import chaos_mailbox as mb
from adapters.local.chaos import HostKiller, PubSubFaults
from shared.chaos import chaos_plan as cp


def test_an_api_outage_is_played_on_the_cluster_itself(tmp_path):
    """`cluster_api_down` stops the API server (LocalKubernetes.api_outage), not a gate."""
    from adapters.local.chaos import ChaosInjector

    cluster = PodCluster()
    inj = ChaosInjector([], tmp_path, cluster)
    inj._arm(cp.Fault(0, cp.CLUSTER_API_DOWN, 0.0))
    assert cluster.calls == [("outage", cp.CLUSTER_DOWN_S)]
    assert inj.injected[cp.CLUSTER_API_DOWN] == 1


class Message:
    def __init__(self) -> None:
        self.acked = 0

    def ack(self) -> None:
        self.acked += 1


@pytest.mark.parametrize(
    ("kind", "now", "later", "acked"),
    [
        (cp.PUBSUB_DUPLICATE, ["m", "m"], ["m", "m"], 0),
        (cp.PUBSUB_DROP, [], [], 1),
        (cp.PUBSUB_DELAY, [], ["m"], 0),
    ],
)
def test_pubsub_faults_take_the_next_event_or_kick(monkeypatch, kind, now, later, acked):
    monkeypatch.setattr("adapters.local.chaos.DELAY_S", 0.1)
    hook, seen, msg = PubSubFaults(), [], Message()
    assert hook("job-events-fn", msg, lambda: seen.append("x")) is False  # nothing armed
    hook.arm(kind)
    assert hook("ticks-fn", msg, lambda: seen.append("tick")) is False  # ticks are left be
    assert hook("job-events-fn", msg, lambda: seen.append("m")) is True
    assert seen == now and msg.acked == acked
    time.sleep(0.3)
    assert seen == later and dict(hook.injected) == {kind: 1}


def test_a_reordered_message_goes_after_the_next_one():
    hook, seen = PubSubFaults(), []
    hook.arm(cp.PUBSUB_REORDER)
    assert hook("kick-fn", Message(), lambda: seen.append("first")) is True
    assert hook("job-events-fn", Message(), lambda: seen.append("second")) is False
    seen.append("second")  # the dispatcher delivers the message the hook let through
    time.sleep(0.2)
    assert seen == ["second", "first"]


def test_the_host_killer_fails_the_first_write_once_per_arming():
    """Through the stack's WriteGate: reads pass, the first write after arming raises and
    does not happen (the act of a committed decision begins with a write), the next acts."""
    from adapters.local.chaos import HostKilledError
    from adapters.local.write_gate import WriteGate

    class Inner:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def get_job(self, name):
            self.calls.append(f"get {name}")

        def create_job(self, manifest):
            self.calls.append(f"create {manifest['name']}")
            return True

        def patch_job(self, name, *, parallelism=None, suspend=None):
            self.calls.append(f"patch {name} {parallelism} {suspend}")

    inner, killer = Inner(), HostKiller()
    gate = WriteGate(inner)  # type: ignore[arg-type]
    gate.fault_hook = killer.before_write
    gate.create_job({"name": "a"})  # not armed: acts
    killer.arm()
    gate.get_job("a")  # a read is no act
    with pytest.raises(HostKilledError, match="between commit and act"):
        gate.create_job({"name": "b"})
    gate.patch_job("a", parallelism=3)  # disarmed: acts
    assert inner.calls == ["create a", "get a", "patch a 3 None"]
    assert killer.injected == 1


def test_each_armed_fault_goes_to_exactly_one_worker(tmp_path):
    root = mb.mailbox(tmp_path)
    for i in range(20):
        mb.arm(root, f"{i:05d}-chunk_transient", "chunk_transient")
    got: list[dict] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        while (fault := mb.take(root, name)) is not None:
            with lock:
                got.append(fault)

    threads = [threading.Thread(target=worker, args=(f"pod-{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(f["fault_id"] for f in got) == [f"{i:05d}-chunk_transient" for i in range(20)]
    assert len(mb.taken(root)) == 20 and mb.still_armed(root) == []


class PodCluster:
    """The local cluster's chaos hooks, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def kill_pod(self, name):
        self.calls.append(("kill", name))
        return True

    def preempt_pod(self, name):
        self.calls.append(("preempt", name))
        return True

    def lose_node(self, names, keep_running=False):
        self.calls.append(("lose", names[0], keep_running))
        return names

    def api_outage(self, down_s):
        self.calls.append(("outage", down_s))


def test_pod_faults_strike_held_workers_and_every_other_lost_node_leaves_a_zombie(tmp_path):
    from adapters.local.chaos import ChaosInjector

    cluster = PodCluster()
    inj = ChaosInjector([], tmp_path, cluster, probe=lambda f: [9, 10])
    for seq in range(3):
        inj._arm(cp.Fault(seq, cp.NODE_LOST, 0.0))
    assert [mb.take(tmp_path, "p")["zombie"] for _ in range(3)] == [
        True, False, True,
    ]  # fmt: skip
    faults = [
        {"fault_id": "1-pod_sigkill", "kind": cp.POD_SIGKILL, "pod": "a", "chunk_id": 1},
        {"fault_id": "2-pod_preempted", "kind": cp.POD_PREEMPTED, "pod": "b", "chunk_id": 2},
        {"fault_id": "3-node_lost", "kind": cp.NODE_LOST, "pod": "c", "zombie": True},
        {"fault_id": "4-node_lost", "kind": cp.NODE_LOST, "pod": "d", "zombie": False},
    ]
    for f in faults:
        inj._hit_pod(f)
    assert cluster.calls == [
        ("kill", "a"), ("preempt", "b"), ("lose", "c", True), ("lose", "d", False),
    ]  # fmt: skip
    released = {p.name.split(".")[0] for p in (tmp_path / mb.HELD).glob("*.released")}
    assert released == {"3-node_lost"}  # only the zombie's process goes on; a preempted
    # worker stays held past its grace period
    assert [s["rows_at_kill"] for s in inj.struck] == [[9, 10]] * 4
    assert [s["zombie"] for s in inj.struck] == [False, False, True, False]


def test_faults_wait_for_the_runs_progress_and_worker_faults_go_one_at_a_time(tmp_path):
    """A run slowed by faults is not hit faster than it moves (the injector paces by the
    progress it is given), and a second worker fault is armed only once a worker took the
    first: 200 faults on a crawling run no longer all land in the first minute."""
    from adapters.local.chaos import ChaosInjector

    progress = [0.0]
    faults = [
        cp.Fault(0, cp.POD_SIGKILL, 0.0),
        cp.Fault(1, cp.CHUNK_TRANSIENT, 0.1),
        cp.Fault(2, cp.PUBSUB_DROP, 0.2),
        cp.Fault(3, cp.PUBSUB_DUPLICATE, 0.5),  # half of the 1 s baseline: at 50 % done
    ]
    inj = ChaosInjector(
        faults, tmp_path, PodCluster(), progress=lambda: progress[0], expected_wall_s=1.0
    ).start()
    try:
        time.sleep(0.8)
        # Progress 0 only lets the fault at offset 0 through.
        assert mb.still_armed(tmp_path) == ["00000-pod_sigkill"]
        progress[0] = 0.3
        time.sleep(0.4)
        assert mb.still_armed(tmp_path) == ["00000-pod_sigkill"]  # the next worker fault waits
        assert inj.pubsub._armed == [cp.PUBSUB_DROP]  # a Pub/Sub fault needs no worker
        assert mb.take(tmp_path, "pod-a", [cp.CHUNK_TRANSIENT]) is None  # not armed yet
        assert mb.take(tmp_path, "pod-a")["kind"] == cp.POD_SIGKILL
        time.sleep(0.4)
        assert mb.still_armed(tmp_path) == ["00001-chunk_transient"]
        progress[0] = 0.5
        time.sleep(0.4)
        assert inj.pubsub._armed == [cp.PUBSUB_DROP, cp.PUBSUB_DUPLICATE]
    finally:
        inj.stop()


@pytest.mark.parametrize(
    ("write", "args"),
    [
        ("create_job", ({"name": "a"},)),
        ("apply_config_map", ({"name": "c"},)),
        ("patch_job", ("a",)),
        ("delete_job", ("a",)),
        ("drain_job", ("a",)),
        ("delete_pod", ("p",)),
        ("resize_pod", ("p", "worker", {})),
    ],
)
def test_every_write_of_the_job_writer_port_passes_the_gate(write, args):
    """A write the WriteGate let past its hook would be one `host_killed` cannot stop."""
    from adapters.local.write_gate import WriteGate

    class Inner:
        calls: list[str] = []

        def __getattr__(self, name):
            return lambda *a, **k: self.calls.append(name)

    inner = Inner()
    gate = WriteGate(inner)  # type: ignore[arg-type]

    def refuse(name: str) -> None:
        raise RuntimeError(f"refused {name}")

    gate.fault_hook = refuse
    with pytest.raises(RuntimeError, match=f"refused {write}"):
        getattr(gate, write)(*args)
    assert inner.calls == []
    gate.fault_hook = None
    getattr(gate, write)(*args)
    assert inner.calls == [write]
