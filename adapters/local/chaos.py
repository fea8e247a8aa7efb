"""The chaos injector of the local stack: plays a `shared.chaos.chaos_plan` on a running demo.

A thread arms each planned fault when it is due (`chaos_plan.is_due`: its offset passed and
the run as far along as the baseline was then, by the `progress` it is given; one worker
fault waiting for a worker at a time; API outages apart), through the mechanism that fault
needs, and counts the faults actually injected (a fault with nothing to act on yet waits):

- worker faults (`chaos_plan.WORKER_KINDS`) go to the chaos mailbox; the next worker that
  begins a chunk (chunk-level kinds) or writes rows (pod-level kinds) takes one
  (`worker.chaos_points`). For pod-level kinds it holds mid-write; this thread reads the
  rows the attempt has written so far (`probe`: what `partial_writes_recovered` is counted
  against), then SIGKILLs, preempts (not released: the worker outstays its SIGTERM grace)
  or loses that pod through the local cluster's hooks. Every other `node_lost`, starting
  with the first, leaves a *zombie*: the pod is gone from the API but its process is
  released and goes on until its claim is fenced;
- Pub/Sub faults hook the local Eventarc (`Dispatcher.fault_hook`): the next job event or
  kick is duplicated, delayed, held behind the next one, or acknowledged and dropped;
- `host_killed`: the next cluster write of the in-process functions (the first action of a
  committed decision) raises instead, through the stack's `WriteGate`, as a function host
  killed between commit and act (Pub/Sub redelivers; ticks finish the act);
- `cluster_api_down`: the API server itself is stopped for `CLUSTER_DOWN_S` and started
  again (`LocalKubernetes.api_outage`): the controller's calls fail as the GKE adapter's
  `ClusterUnreachableError`, the kubelet, the controller manager and the scheduler retry.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters import chaos_mailbox as mb
from adapters.local.write_gate import WriteGate
from shared.chaos import chaos_plan as cp

log = logging.getLogger("cave_pipeline.chaos")

PUBSUB_KINDS = (cp.PUBSUB_DUPLICATE, cp.PUBSUB_DELAY, cp.PUBSUB_REORDER, cp.PUBSUB_DROP)
PUBSUB_TARGETS = ("job-events-fn", "kick-fn")  # ticks come every period anyway
DELAY_S = 3.0  # how late a delayed message arrives
REORDER_MAX_S = 5.0  # a held-back message goes at the latest this long after


class HostKilledError(RuntimeError):
    """Injected: the function host died after the commit, before the act."""


class PubSubFaults:
    """`Dispatcher.fault_hook`: plays armed Pub/Sub faults on the next target message."""

    def __init__(self) -> None:
        self._armed: list[str] = []
        self._held: list[Callable[[], None]] = []  # reordered: go after the next message
        self._lock = threading.Lock()
        self.injected: Counter[str] = Counter()

    def arm(self, kind: str) -> None:
        with self._lock:
            self._armed.append(kind)

    def __call__(self, sub: str, message: Any, deliver: Callable[[], None]) -> bool:
        """True if the fault took the message over (the dispatcher then does nothing)."""
        with self._lock:
            released, self._held = self._held, []
            kind = self._armed.pop(0) if self._armed and sub in PUBSUB_TARGETS else None
            if kind is not None:
                self.injected[kind] += 1
        for later in released:  # held back behind this message: it goes after it
            _later(0.05, later)
        if kind is None:
            return False
        log.info("chaos: %s on a %s message", kind, sub)
        if kind == cp.PUBSUB_DUPLICATE:
            deliver()
            deliver()
        elif kind == cp.PUBSUB_DELAY:
            _later(DELAY_S, deliver)
        elif kind == cp.PUBSUB_REORDER:
            once = _once(deliver)
            with self._lock:
                self._held.append(once)
            _later(REORDER_MAX_S, once)
        else:  # dropped: acknowledged, never delivered
            message.ack()
        return True


def _later(delay_s: float, fn: Callable[[], None]) -> None:
    timer = threading.Timer(delay_s, fn)
    timer.daemon = True  # a stack that stops does not wait for a late delivery
    timer.start()


def _once(fn: Callable[[], None]) -> Callable[[], None]:
    lock, done = threading.Lock(), [False]

    def call() -> None:
        with lock:
            if done[0]:
                return
            done[0] = True
        fn()

    return call


class HostKiller:
    """Arms `host_killed`: the next cluster write, the first action of a committed decision
    (the controller writes to the cluster only in its act), raises in place of acting, as a
    function host killed between commit and act. Its `before_write` is the stack's
    `WriteGate.fault_hook` while the injector runs."""

    def __init__(self) -> None:
        self._armed = 0
        self._lock = threading.Lock()
        self.injected = 0

    def arm(self) -> None:
        with self._lock:
            self._armed += 1

    def before_write(self, write: str) -> None:
        """Raise HostKilledError once per arming (the write does not happen)."""
        with self._lock:
            if self._armed <= 0:
                return
            self._armed -= 1
            self.injected += 1
        log.info("chaos: function host killed between commit and act (%s)", write)
        raise HostKilledError("chaos: function host killed between commit and act")


class ChaosInjector:
    """Plays `faults` (offsets from `start()`) on the stack's cluster and dispatcher."""

    def __init__(
        self,
        faults: list[cp.Fault],
        root: Path,
        cluster: Any,
        probe: Callable[[dict[str, Any]], list[int]] | None = None,
        progress: Callable[[], float] | None = None,
        expected_wall_s: float | None = None,
        write_gate: WriteGate | None = None,
    ) -> None:
        self.faults, self.root, self.cluster = faults, mb.mailbox(root), cluster
        # probe(held fault) -> ids of the rows the held attempt's chunk holds now
        self.probe = probe
        # progress() -> the share of the build begun; without it faults go by time alone
        self.progress, self.expected_wall_s = progress, expected_wall_s
        self._outage_at: float | None = None  # elapsed s when the last outage was armed
        self.write_gate = write_gate  # the in-process functions' cluster writes
        self.struck: list[dict[str, Any]] = []  # pod faults that hit: held doc + rows seen
        self._node_lost = 0
        self.pubsub, self.host = PubSubFaults(), HostKiller()
        self.injected: Counter[str] = Counter()  # by the injector itself (pod, API faults)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-injector", daemon=True)
        self._started = 0.0

    def start(self) -> ChaosInjector:
        if self.write_gate is not None:
            self.write_gate.fault_hook = self.host.before_write
        self._started = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        if self.write_gate is not None:
            self.write_gate.fault_hook = None
        for fault in mb.held(self.root):  # never leave a worker holding
            mb.mark_handled(self.root, fault["fault_id"], release=True)

    def _run(self) -> None:
        pending = list(self.faults)  # sorted by offset
        while not self._stop.wait(0.1):
            elapsed = time.monotonic() - self._started
            ripe = [f for f in pending if f.at_s <= elapsed]
            if ripe:
                pace = self._pace(elapsed)
                for fault in ripe:
                    if cp.is_due(fault, self._expected_wall_s(), pace):
                        pending.remove(fault)
                        self._arm(fault)
                        pace = self._pace(elapsed)
            for fault in mb.held(self.root):
                try:
                    self._hit_pod(fault)
                except Exception:  # noqa: BLE001 - the injector must outlive a failed fault
                    log.exception("chaos: %s failed", fault["fault_id"])
                    mb.mark_handled(self.root, fault["fault_id"], release=True)

    def _pace(self, elapsed: float) -> cp.Pace:
        since = None if self._outage_at is None else elapsed - self._outage_at
        return cp.Pace(
            elapsed_s=elapsed,
            progress=1.0 if self.progress is None else self.progress(),
            worker_fault_waiting=bool(mb.still_armed(self.root)),
            since_outage_s=since,
        )

    def _expected_wall_s(self) -> float:
        """The duration the offsets were planned over (without one: progress plays no part)."""
        if self.expected_wall_s is None or self.progress is None:
            return float("inf")
        return self.expected_wall_s

    def _arm(self, fault: cp.Fault) -> None:
        log.info("chaos: arming %s at %.1f s", fault.fault_id, fault.at_s)
        if fault.kind == cp.NODE_LOST:
            self._node_lost += 1  # the first, third, ... leave a zombie
            mb.arm(self.root, fault.fault_id, fault.kind, zombie=self._node_lost % 2 == 1)
        elif fault.kind in cp.WORKER_KINDS:
            mb.arm(self.root, fault.fault_id, fault.kind)
        elif fault.kind in PUBSUB_KINDS:
            self.pubsub.arm(fault.kind)
        elif fault.kind == cp.HOST_KILLED:
            self.host.arm()
        elif fault.kind == cp.CLUSTER_API_DOWN:
            self._outage_at = time.monotonic() - self._started
            self.cluster.api_outage(cp.CLUSTER_DOWN_S)
            self.injected[fault.kind] += 1

    def _hit_pod(self, fault: dict[str, Any]) -> None:
        kind, pod, fid = fault["kind"], fault["pod"], fault["fault_id"]
        zombie = kind == cp.NODE_LOST and bool(fault.get("zombie"))
        rows = self.probe(fault) if self.probe is not None else []  # the worker is held
        if kind == cp.POD_SIGKILL:
            hit = self.cluster.kill_pod(pod)
        elif kind == cp.POD_PREEMPTED:
            hit = self.cluster.preempt_pod(pod)
        else:
            hit = bool(self.cluster.lose_node([pod], keep_running=zombie))
        log.info(
            "chaos: %s%s on pod %s mid-write (%d rows written): %s",
            kind,
            " (zombie)" * zombie,
            pod,
            len(rows),
            "done" if hit else "pod not found",
        )
        self.injected[kind] += int(hit)
        if hit:
            self.struck.append({**fault, "zombie": zombie, "rows_at_kill": rows})
        # A zombie's process goes on; a preempted one stays held past its grace period.
        mb.mark_handled(self.root, fid, release=zombie or not hit)

    def counts(self) -> dict[str, int]:
        """Faults actually injected, by kind."""
        out: Counter[str] = Counter(self.injected) + Counter(self.pubsub.injected)
        out[cp.HOST_KILLED] += self.host.injected
        for fault in mb.taken(self.root):
            if fault["kind"] not in ("pod_sigkill", "pod_preempted", "node_lost"):
                out[fault["kind"]] += 1
        return {k: v for k, v in sorted(out.items()) if v}
