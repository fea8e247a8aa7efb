"""Start and stop Google's local emulators (Pub/Sub, Firestore, Bigtable) from the gcloud SDK.

The emulators are the real binaries shipped in the SDK's ``platform/`` folder. Each one is
started in its own process group, bound to 127.0.0.1 on a free port, with its output sent to
a log file in a temporary folder; stopping it terminates the whole group (the Firestore
wrapper is a bash script that keeps a ``java`` child), so nothing is left running. Starting
one also makes SIGTERM and SIGHUP unwind the process (``termination.unwind_on_termination``)
so that a killed or timed-out program still stops them.

Only the standard library is used here: no Google client is imported.

Typical use::

    with EmulatorSet() as emus:
        os.environ.update(emus.env)
        ...
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from adapters.common.termination import unwind_on_termination
from adapters.local.process_groups import HOST, free_port, kill_group, log_tail

__all__ = [
    "ALL_EMULATORS",
    "EmulatorMissingError",
    "EmulatorSet",
    "EmulatorStartError",
    "RunningEmulator",
    "check_emulators",
    "sdk_root",
    "start_emulator",
    "wipe_firestore",
]

log = logging.getLogger(__name__)

ALL_EMULATORS: tuple[str, ...] = ("pubsub", "firestore", "bigtable")
SDK_ROOT_ENV = "CLOUDSDK_ROOT"
_POLL_INTERVAL = 0.05
# talks to 127.0.0.1 only: never through an http_proxy from the environment
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class EmulatorMissingError(RuntimeError):
    """An emulator binary (or the Java runtime it needs) is not installed.

    ``packages`` lists the Debian packages to install.
    """

    def __init__(self, message: str, packages: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.packages: tuple[str, ...] = tuple(packages)


class EmulatorStartError(RuntimeError):
    """An emulator exited or did not become ready in time; the message has its log tail."""


@dataclass(frozen=True)
class _Spec:
    name: str
    relpath: str  # below the SDK root
    package: str  # Debian package that ships it
    env_var: str  # where clients look for it
    args: Callable[[str, int], list[str]]  # (host, port) -> arguments after the binary
    http_ready: bool  # GET / answers 200 "Ok" once ready (Java emulators)
    needs_java: bool


_SPECS: dict[str, _Spec] = {
    "pubsub": _Spec(
        name="pubsub",
        relpath="platform/pubsub-emulator/bin/cloud-pubsub-emulator",
        package="google-cloud-cli-pubsub-emulator",
        env_var="PUBSUB_EMULATOR_HOST",
        args=lambda host, port: [f"--host={host}", f"--port={port}"],
        http_ready=True,
        needs_java=True,
    ),
    "firestore": _Spec(
        name="firestore",
        relpath="platform/cloud-firestore-emulator/cloud_firestore_emulator",
        package="google-cloud-cli-firestore-emulator",
        env_var="FIRESTORE_EMULATOR_HOST",
        args=lambda host, port: ["start", f"--host={host}", f"--port={port}"],
        http_ready=True,
        needs_java=True,
    ),
    "bigtable": _Spec(
        name="bigtable",
        relpath="platform/bigtable-emulator/cbtemulator",
        package="google-cloud-cli-bigtable-emulator",
        env_var="BIGTABLE_EMULATOR_HOST",
        args=lambda host, port: [f"-host={host}", f"-port={port}"],
        http_ready=False,  # gRPC only; it serves as soon as the port is open
        needs_java=False,
    ),
}


def _spec(name: str) -> _Spec:
    try:
        return _SPECS[name]
    except KeyError:
        raise ValueError(f"unknown emulator {name!r}; expected one of {ALL_EMULATORS}") from None


# --------------------------------------------------------------------------- SDK lookup


def sdk_root() -> Path:
    """Return the gcloud SDK root folder.

    ``$CLOUDSDK_ROOT`` wins when set (read on every call). Otherwise the ``gcloud`` found on
    PATH is resolved through symlinks to ``<root>/bin/gcloud``; only if that layout is not
    recognised is ``gcloud info`` asked (once per process, with prompts disabled and a
    throw-away config folder).

    Raises:
        EmulatorMissingError: no SDK could be found.
    """
    env_root = os.environ.get(SDK_ROOT_ENV)
    if env_root:
        return Path(env_root)
    return _discover_sdk_root()


@functools.cache
def _discover_sdk_root() -> Path:
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        packages = ["google-cloud-cli", *(s.package for s in _SPECS.values())]
        raise EmulatorMissingError(
            "gcloud SDK not found (no `gcloud` on PATH). Install it with "
            f"`apt-get install {' '.join(packages)}`, or set {SDK_ROOT_ENV} to the SDK root.",
            packages,
        )
    root = Path(os.path.realpath(gcloud)).parent.parent
    if (root / "platform").is_dir() or (root / "lib" / "gcloud.py").is_file():
        return root
    with tempfile.TemporaryDirectory(prefix="gcloud-config-") as config_dir:
        env = {**os.environ, "CLOUDSDK_CORE_DISABLE_PROMPTS": "1", "CLOUDSDK_CONFIG": config_dir}
        out = subprocess.run(
            [gcloud, "info", "--format=value(installation.sdk_root)"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
    return Path(out.stdout.strip())


def _java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home) / "bin" / "java", os.X_OK):
        return True
    return shutil.which(os.environ.get("JAVA", "java")) is not None


def check_emulators(names: Iterable[str] = ALL_EMULATORS) -> None:
    """Fail fast, before starting anything, if any of the named emulators cannot run.

    Raises:
        EmulatorMissingError: naming every missing binary and the packages to install.
        ValueError: an unknown emulator name.
    """
    specs = [_spec(n) for n in names]
    root = sdk_root()
    problems: list[str] = []
    packages: list[str] = []
    for spec in specs:
        path = root / spec.relpath
        if not (path.is_file() and os.access(path, os.X_OK)):
            problems.append(f"{spec.name}: no executable at {path}")
            packages.append(spec.package)
    if any(s.needs_java for s in specs) and not _java_available():
        problems.append(
            "java: no Java runtime on PATH (the Pub/Sub and Firestore emulators need it)"
        )
        packages.append("default-jre-headless")
    if problems:
        raise EmulatorMissingError(
            "gcloud emulators missing: "
            + "; ".join(problems)
            + f". Install with `apt-get install {' '.join(packages)}`"
            + f" (or set {SDK_ROOT_ENV} to an SDK root that has them).",
            packages,
        )


@dataclass
class RunningEmulator:
    """One emulator process started by :func:`start_emulator`."""

    name: str
    host: str
    port: int
    pid: int  # also its process group id
    env_var: str
    log_path: Path
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)
    _remove_dir: Path | None = field(default=None, repr=False, compare=False)

    @property
    def address(self) -> str:
        """``host:port`` as clients expect it in ``env_var``."""
        return f"{self.host}:{self.port}"

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the emulator's whole process group (SIGTERM, then SIGKILL after
        ``timeout`` seconds) and remove its temporary log folder. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        atexit.unregister(self.stop)
        kill_group(proc, timeout)
        if self._remove_dir is not None:
            shutil.rmtree(self._remove_dir, ignore_errors=True)
            self._remove_dir = None
        log.debug("stopped %s emulator (pid %d)", self.name, self.pid)


def _ready(spec: _Spec, port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=0.5).close()
    except OSError:
        return False
    if not spec.http_ready:
        return True
    try:
        with _HTTP.open(f"http://{HOST}:{port}/", timeout=1.0) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


def start_emulator(
    name: str, *, port: int | None = None, timeout: float = 30, log_dir: Path | None = None
) -> RunningEmulator:
    """Start one emulator (``"pubsub"``, ``"firestore"`` or ``"bigtable"``) on 127.0.0.1 and
    wait until it serves.

    Args:
        port: fixed port; by default a free one is picked (and a second one tried if the
            emulator exits at once, e.g. because another process took the port meanwhile).
        timeout: seconds to wait for readiness.
        log_dir: where to write ``<name>-<port>.log``; by default a new temporary folder that
            :meth:`RunningEmulator.stop` removes again.

    Raises:
        EmulatorMissingError: the binary is not installed.
        EmulatorStartError: it exited or did not become ready within ``timeout``.
    """
    spec = _spec(name)
    check_emulators([name])
    unwind_on_termination()  # a SIGTERM now stops it too (no-op off the main thread)
    attempts = 1 if port is not None else 2
    for attempt in range(1, attempts + 1):
        try:
            return _start_once(spec, port or free_port(), timeout, log_dir)
        except _ExitedEarly as exc:
            if attempt == attempts:
                raise EmulatorStartError(str(exc)) from None
            log.warning("%s; retrying on another port", exc)
    raise AssertionError("unreachable")


class _ExitedEarly(Exception):
    pass


def _start_once(spec: _Spec, port: int, timeout: float, log_dir: Path | None) -> RunningEmulator:
    remove_dir = None
    if log_dir is None:
        log_dir = remove_dir = Path(tempfile.mkdtemp(prefix=f"emulator-{spec.name}-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{spec.name}-{port}.log"
    cmd = [str(sdk_root() / spec.relpath), *spec.args(HOST, port)]
    started = time.monotonic()
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=log_dir,  # keeps any files the emulator writes out of the caller's folder
            start_new_session=True,  # own process group, so stop() can end its children too
        )
    emu = RunningEmulator(
        name=spec.name,
        host=HOST,
        port=port,
        pid=proc.pid,
        env_var=spec.env_var,
        log_path=log_path,
        _proc=proc,
        _remove_dir=remove_dir,
    )
    atexit.register(emu.stop)  # safety net if the caller never stops it
    try:
        _wait_ready(spec, emu, proc, cmd, started + timeout, timeout)
    except BaseException:
        emu.stop()  # no-op if already stopped
        raise
    log.debug(
        "%s emulator ready on %s in %.2f s (pid %d)",
        spec.name,
        emu.address,
        time.monotonic() - started,
        proc.pid,
    )
    return emu


def _wait_ready(
    spec: _Spec,
    emu: RunningEmulator,
    proc: subprocess.Popen[bytes],
    cmd: list[str],
    deadline: float,
    timeout: float,
) -> None:
    port, log_path = emu.port, emu.log_path
    while True:
        if proc.poll() is not None:
            emu._remove_dir = None  # keep the log for whoever reads the error
            emu.stop()  # its children may still run; also unregisters the atexit hook
            raise _ExitedEarly(
                f"{spec.name} emulator ({' '.join(cmd)}) exited with code {proc.returncode} "
                f"before it was ready. Log {log_path}:\n{log_tail(log_path)}"
            )
        if _ready(spec, port):
            if spec.http_ready:
                return
            # A bare TCP check cannot tell our listener from another process on the port;
            # cbtemulator exits within milliseconds if it cannot bind, so look once more.
            time.sleep(0.2)
            if proc.poll() is None:
                return
            continue
        if time.monotonic() >= deadline:
            tail = log_tail(log_path)
            emu._remove_dir = None  # keep the log for whoever reads the error
            emu.stop()
            raise EmulatorStartError(
                f"{spec.name} emulator ({' '.join(cmd)}) not ready on {HOST}:{port} after "
                f"{timeout:g} s. Log {log_path}:\n{tail}"
            )
        time.sleep(_POLL_INTERVAL)


class EmulatorSet:
    """Several emulators started in parallel and stopped together.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. If one emulator fails to
    start, the others are stopped before the error propagates.
    """

    def __init__(
        self,
        names: Iterable[str] = ALL_EMULATORS,
        *,
        timeout: float = 60,
        log_dir: Path | None = None,
    ) -> None:
        self.names: tuple[str, ...] = tuple(names)
        for n in self.names:
            _spec(n)
        self.timeout = timeout
        self.log_dir = log_dir  # None: one temporary folder per emulator, removed on stop
        self.emulators: dict[str, RunningEmulator] = {}

    @property
    def env(self) -> dict[str, str]:
        """Client environment, e.g. ``{"PUBSUB_EMULATOR_HOST": "127.0.0.1:40123", ...}``."""
        return {e.env_var: e.address for e in self.emulators.values()}

    def __getitem__(self, name: str) -> RunningEmulator:
        return self.emulators[name]

    def start(self) -> EmulatorSet:
        """Start every named emulator concurrently and wait until all are ready.

        Raises:
            EmulatorMissingError: before anything is started, if any binary is missing.
            EmulatorStartError: if one failed to start (the others are stopped again).
        """
        if self.emulators:
            raise RuntimeError("EmulatorSet already started")
        check_emulators(self.names)
        unwind_on_termination()  # the emulators start in threads, where it cannot be set
        errors: list[BaseException] = []
        with ThreadPoolExecutor(max_workers=max(1, len(self.names))) as pool:
            futures = {
                n: pool.submit(start_emulator, n, timeout=self.timeout, log_dir=self.log_dir)
                for n in self.names
            }
            for name, future in futures.items():
                try:
                    self.emulators[name] = future.result()
                except BaseException as exc:  # collected, stopped, re-raised
                    errors.append(exc)
        if errors:
            self.stop()
            raise errors[0]
        return self

    def stop(self) -> None:
        """Stop all started emulators (in parallel). Idempotent."""
        emulators, self.emulators = list(self.emulators.values()), {}
        if not emulators:
            return
        with ThreadPoolExecutor(max_workers=len(emulators)) as pool:
            for future in [pool.submit(e.stop) for e in emulators]:
                future.result()

    def __enter__(self) -> EmulatorSet:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# --------------------------------------------------------------------------- helpers


def wipe_firestore(address: str, project: str) -> None:
    """Delete every document of ``project``'s default database in the Firestore emulator
    at ``address`` (``host:port``)."""
    url = (
        f"http://{address}/emulator/v1/projects/{urllib.parse.quote(project, safe='')}"
        "/databases/(default)/documents"
    )
    request = urllib.request.Request(url, method="DELETE")
    try:
        with _HTTP.open(request, timeout=10) as resp:
            resp.read()
    except urllib.error.HTTPError as exc:
        raise RuntimeError(
            f"wiping Firestore emulator project {project!r} at {address} failed: "
            f"HTTP {exc.code} {exc.read()[:500]!r}"
        ) from exc
