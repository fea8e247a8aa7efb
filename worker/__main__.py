"""``python -m worker``: one pod runs one batch (``JOB_COMPLETION_INDEX``) of one layer.

Exit codes (``worker.errors``): 0 done, 1 transient (Kubernetes retries the index), 42 fatal
(bad config or a FatalChunkError: the index fails), 143 SIGTERM (Spot preemption: ignored by
the Job's DisruptionTarget rule). The environment is documented in ``worker.env``.

SIGTERM is taken by a dedicated thread (``sigwait``), so it is seen even while the main
thread is blocked in a gRPC call: no new chunk is started, the running one gets
``PCG_TERM_GRACE_S`` to finish, then its claim is released and the worker exits 143.

The Bigtable data client leaves a non-daemon thread behind, so the worker never returns
normally: it flushes its logs and leaves with ``os._exit``.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from datetime import timedelta
from typing import Any

from worker.errors import EXIT_FATAL, EXIT_PREEMPTED, EXIT_TRANSIENT, WorkerConfigError
from worker.logs import JsonLogger, JsonLogHandler


def _process_age_s() -> float | None:
    """Seconds since this process started (Linux), i.e. interpreter start-up and imports
    included; None where /proc is unavailable."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return round(uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError):
        return None


def _exit(log: JsonLogger, code: int) -> None:
    log.flush()
    logging.shutdown()
    os._exit(code)


def _int_or_raw(value: str | None) -> Any:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return value


def _start_signal_thread(stop: threading.Event, state: dict[str, Any], log: JsonLogger) -> None:
    """Block SIGTERM in every thread (the mask is inherited by threads created later, gRPC's
    included) and take it synchronously on a daemon thread."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def wait_for_sigterm() -> None:
        signal.sigwait({signal.SIGTERM})
        stop.set()
        grace = state.get("grace_s", 15.0)
        state["log"].warning(
            f"SIGTERM: starting no new chunk; the running one has {grace:g} s to finish",
            grace_s=grace,
        )
        time.sleep(grace)  # the main thread exits by itself if its chunk ends in time
        runner = state.get("runner")
        code = runner.abort() if runner is not None else EXIT_PREEMPTED
        _exit(state["log"], code)

    state.setdefault("log", log)
    threading.Thread(target=wait_for_sigterm, name="sigterm", daemon=True).start()


def main() -> int:
    env_vars = os.environ
    log = JsonLogger(
        level=env_vars.get("PCG_LOG_LEVEL", "INFO"),
        run=env_vars.get("PCG_RUN_ID", ""),
        stage=env_vars.get("PCG_STAGE", "ingest"),
        layer=_int_or_raw(env_vars.get("PCG_LAYER")),
        index=_int_or_raw(env_vars.get("JOB_COMPLETION_INDEX")),
    )
    stop = threading.Event()
    state: dict[str, Any] = {}
    _start_signal_thread(stop, state, log)

    from worker.env import parse_env  # numpy + shared.model.grid only

    try:
        env = parse_env(env_vars)
    except WorkerConfigError as exc:
        log.error(f"bad worker environment: {exc}", exit_code=EXIT_FATAL)
        return EXIT_FATAL
    log = log.bind(run=env.run_id, stage=env.stage, layer=env.layer, index=env.index)
    state.update(log=log, grace_s=env.term_grace_s)

    from adapters.bigtable.chunk_ledger import BigtableChunkLedger, open_bigtable_client
    from adapters.bigtable.graph_meta_store import read_graph_meta
    from worker.claim_tokens import attempt_token, lineage, lineage_range, takeover_enabled
    from worker.env import with_graph_meta
    from worker.harness import BatchRunner
    from worker.plugins import load_workload

    try:
        fn = load_workload(env.workload)
    except WorkerConfigError as exc:
        log.error(f"bad workload: {exc}", exit_code=EXIT_FATAL)
        return EXIT_FATAL
    logging.getLogger().addHandler(JsonLogHandler(log))  # library warnings stay JSON
    try:
        client = open_bigtable_client(
            env.graph_id, env.project, env.instance, timedelta(seconds=env.lock_expiry_s)
        )
    except Exception as exc:  # noqa: BLE001 - e.g. credentials not yet available
        log.error(f"cannot open Bigtable table {env.graph_id!r}: {exc!r}", exit_code=1)
        return EXIT_TRANSIENT
    client.logger.handlers[:] = [JsonLogHandler(log)]  # kvdbclient prints to stdout otherwise
    client.logger.propagate = False
    try:
        # The grid is the graph's (its setup wrote it), as PyChunkedGraph's workers read it.
        env = with_graph_meta(env, read_graph_meta(client))
    except WorkerConfigError as exc:
        log.error(f"bad graph metadata: {exc}", exit_code=EXIT_FATAL)
        return EXIT_FATAL
    except Exception as exc:  # noqa: BLE001 - Bigtable unavailable: retried by Kubernetes
        # No such table: the plugin's first read says so, naming it.
        if not BigtableChunkLedger(client, env.stage).table_missing(exc):
            log.error(f"cannot read the graph metadata: {exc!r}", exit_code=EXIT_TRANSIENT)
            return EXIT_TRANSIENT
    try:
        takeover = takeover_enabled(env_vars)
    except ValueError as exc:
        log.error(f"bad worker environment: {exc}", exit_code=EXIT_FATAL)
        return EXIT_FATAL
    # Tokens say whose they are: this Job index's lineage plus random attempt bits.
    own = lineage(env.graph_id, env.stage, env.layer, env.run_id, env.index, env.job_attempt)
    token = attempt_token(own)
    runner = BatchRunner(
        env,
        client,
        fn,
        log,
        token=token,
        stop=stop,
        summary_fields={
            "startup_s": _process_age_s(),
            "n_processes": env.n_processes,
            "token": token,
        },
        lineage=lineage_range(own) if takeover else None,
        hard_exit=lambda code: _exit(log, code),
    )
    state["runner"] = runner
    return runner.run()


if __name__ == "__main__":
    _code = EXIT_TRANSIENT
    _log = JsonLogger()
    try:
        _code = main()
    except BaseException as _exc:  # noqa: BLE001 - never leave without a log line and a code
        import traceback

        _log.error(f"worker crashed: {_exc!r}", traceback=traceback.format_exc(), exit_code=1)
    finally:
        sys.stdout.flush()
        _exit(_log, _code)
