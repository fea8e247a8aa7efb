"""How the local stack starts the control plane's processes: they die with the thread that
started them, and a process that has gRPC running (the Pub/Sub and Firestore clients of
`pipeline local up`) starts them without the child aborting before exec.

CI once saw kube-apiserver "exit with -6" before it ran (its log: gRPC's
``Epoll1Poller ... epoll_wait error: Bad file descriptor``): Popen with a ``preexec_fn``
forks, a fork runs gRPC's at-fork handlers, and the poller they restart aborts the child
when Popen closes its descriptors. About one start in a hundred did so here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

STARTS = 500  # at ~1 % aborted per start, a regression passes this by chance < 1 % of runs

_SPAWN_BESIDE_GRPC = textwrap.dedent(
    """
    import os, subprocess, sys
    import grpc
    from adapters.local.process_groups import start_group_dying_with_parent

    channel = grpc.insecure_channel("127.0.0.1:1")  # nothing listens: gRPC's poller keeps busy
    try:
        grpc.channel_ready_future(channel).result(timeout=0.2)
    except grpc.FutureTimeoutError:
        pass
    failed = 0
    devnull = open(os.devnull, "wb")
    for _ in range(int(sys.argv[1])):
        child = start_group_dying_with_parent(["true"], devnull, dict(os.environ))
        failed += child.wait() != 0
    print(failed)
    """
)


def test_children_started_beside_a_running_grpc_all_reach_exec() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _SPAWN_BESIDE_GRPC, str(STARTS)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert out.stdout.strip() == "0", f"{out.stdout} of {STARTS} starts aborted"


_START_AND_HANG = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from adapters.local.process_groups import start_group_dying_with_parent

    child = start_group_dying_with_parent(["sleep", "120"], sys.stdout.buffer, dict(os.environ))
    print(child.pid, flush=True)
    time.sleep(120)
    """
)


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except FileNotFoundError:
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_child_in_its_own_group_dies_when_its_parent_is_sigkilled() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _START_AND_HANG], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        assert _alive(child)
        # setpriv sets the death signal, then execs the command: a parent killed before that
        # (microseconds after the start; it happened under load) would leave no signal set.
        # The window is the start's own, so the test waits it out first.
        deadline = time.monotonic() + 10
        while _comm(child) != "sleep" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _comm(child) == "sleep", "the child never reached its command"
        parent.send_signal(signal.SIGKILL)  # no unwinding: only the death signal can stop it
        parent.wait()
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the child outlived its SIGKILLed parent"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_recorded_group_is_ours_only_while_its_leader_is_the_process_recorded() -> None:
    """What a crashed stack's successor may kill: pids are reused within minutes (pid_max is
    often 32768), so a live leader with another start time is someone else's process."""
    from adapters.local.crashed_stack import still_ours
    from adapters.local.process_groups import start_ticks

    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        started = start_ticks(child.pid)
        assert started is not None
        assert still_ours(child.pid, started)
        assert not still_ours(child.pid, started + 1)  # the same pid, another process
    finally:
        child.kill()
        child.wait()
    assert not still_ours(child.pid, started)
