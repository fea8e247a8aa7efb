"""Builds Kubernetes' own control plane (kube-apiserver, kube-controller-manager, kube-scheduler,
etcd) and metrics-server from Go modules into one multi-call binary, cached by version and
go.sum; metrics-server's own manifests (its RBAC and APIService) are copied beside it.

The Go module beside this file (`go.mod`, `main.go`) requires `k8s.io/kubernetes` at one pinned
release and replaces each of its staging modules (`k8s.io/api`, `k8s.io/client-go`, ...) with
the published `v0.X.Y` twin: `go build` cannot use k8s.io/kubernetes's own `./staging/...`
replacements from the module proxy. The list of staging modules is derived from
k8s.io/kubernetes's go.mod (`--regenerate` writes it; every build checks it), never typed.

    python3 -m adapters.local.controlplane.build            # build, or reuse the cached binary
    python3 -m adapters.local.controlplane.build --regenerate  # re-derive go.mod's replaces

The binary goes to `<repo>/.controlplane/<version>-<key>/kube` (git-ignored), `key` a digest of
go.mod, go.sum, main.go and the Go version: a second build with nothing changed returns at once.
docs/local-cluster.md has the build's time and disk on a fresh machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MODULE_DIR = Path(__file__).resolve().parent
REPO = MODULE_DIR.parents[2]
CACHE_ENV = "CAVE_CONTROLPLANE_DIR"  # where built binaries are kept (default <repo>/.controlplane)
DEFAULT_CACHE = REPO / ".controlplane"
KUBERNETES = "k8s.io/kubernetes"
# A cold build writes about 4 GiB of Go build cache and 1 GiB of modules (docs/local-cluster.md).
MIN_FREE_GIB = 6.0
_STAGING = re.compile(r"^\s*(k8s\.io/[\w.\-]+)\s*=>\s*\./staging/src/\S+", re.M)
_REPLACE_BLOCK = re.compile(r"^replace \(\n.*?^\)\n", re.M | re.S)


class BuildError(RuntimeError):
    """The control plane cannot be built here; the message names the fix."""


@dataclass(frozen=True)
class Built:
    """A control-plane binary and what it was built from."""

    binary: Path
    version: str  # the Kubernetes release, e.g. v1.34.4
    cached: bool  # True: an earlier build was reused
    seconds: float


def kubernetes_version(go_mod: str | None = None) -> str:
    """The pinned k8s.io/kubernetes release of the module's go.mod."""
    text = go_mod if go_mod is not None else (MODULE_DIR / "go.mod").read_text()
    m = re.search(rf"^\s*(?:require\s+)?{re.escape(KUBERNETES)}\s+(v\S+)", text, re.M)
    if m is None:
        raise BuildError(f"{MODULE_DIR / 'go.mod'} does not require {KUBERNETES}")
    return m.group(1)


def staging_modules(kubernetes_go_mod: str) -> list[str]:
    """The staging modules k8s.io/kubernetes's go.mod replaces with `./staging/src/...`."""
    return sorted(set(_STAGING.findall(kubernetes_go_mod)))


def twin_version(version: str) -> str:
    """The published twin of a release's staging modules: v1.34.4 -> v0.34.4."""
    m = re.fullmatch(r"v1\.(\d+)\.(\d+)", version)
    if m is None:
        raise BuildError(f"{KUBERNETES} {version} is not a release of the form v1.X.Y")
    return f"v0.{m.group(1)}.{m.group(2)}"


def replace_block(modules: list[str], version: str) -> str:
    """go.mod's replace block: each staging module by its published twin."""
    twin = twin_version(version)
    return "replace (\n" + "".join(f"\t{m} => {m} {twin}\n" for m in modules) + ")\n"


def go(*args: str, env: dict[str, str] | None = None, cwd: Path = MODULE_DIR) -> str:
    """Run the go tool in the module; BuildError with its output on failure."""
    try:
        done = subprocess.run(
            ["go", *args], cwd=cwd, env=env or go_env(), capture_output=True, text=True
        )
    except FileNotFoundError:
        raise BuildError(
            "the Go toolchain is not installed: install Go 1.24 or newer, put `go` on PATH, "
            "then run scripts/setup.sh again"
        ) from None
    if done.returncode != 0:
        raise BuildError(f"`go {' '.join(args)}` failed:\n{done.stderr.strip()[-3000:]}")
    return done.stdout


def go_env() -> dict[str, str]:
    """The go tool's environment: the local toolchain only (never a downloaded one)."""
    return {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-buildvcs=false -mod=readonly"}


def check_go() -> str:
    """The Go version (e.g. go1.26.8); BuildError if missing or older than go.mod's `go` line."""
    version = go("env", "GOVERSION").strip()
    want = re.search(r"^go (\d+)\.(\d+)", (MODULE_DIR / "go.mod").read_text(), re.M)
    have = re.match(r"go(\d+)\.(\d+)", version)
    if want and have and tuple(map(int, have.groups())) < tuple(map(int, want.groups())):
        raise BuildError(
            f"Go {version} is too old: the control plane needs go{want.group(1)}.{want.group(2)} "
            "or newer; install a newer Go, then run scripts/setup.sh again"
        )
    return version


def kubernetes_go_mod(version: str) -> str:
    """k8s.io/kubernetes's own go.mod at `version`, from the module proxy (or its cache)."""
    info = json.loads(go("mod", "download", "-json", f"{KUBERNETES}@{version}"))
    return Path(info["GoMod"]).read_text()


def check_replaces(version: str) -> None:
    """BuildError unless go.mod's replace block is the one derived from k8s.io/kubernetes."""
    want = replace_block(staging_modules(kubernetes_go_mod(version)), version)
    text = (MODULE_DIR / "go.mod").read_text()
    have = _REPLACE_BLOCK.search(text)
    if have is None or have.group(0) != want:
        raise BuildError(
            f"{MODULE_DIR / 'go.mod'}: its replace block is not the one {KUBERNETES} {version} "
            "derives; run `python3 -m adapters.local.controlplane.build --regenerate`"
        )


def regenerate() -> None:
    """Write go.mod's replace block from k8s.io/kubernetes's go.mod, then `go mod tidy`."""
    path = MODULE_DIR / "go.mod"
    version = kubernetes_version()
    block = replace_block(staging_modules(kubernetes_go_mod(version)), version)
    text = path.read_text()
    text = _REPLACE_BLOCK.sub(block, text) if _REPLACE_BLOCK.search(text) else text + "\n" + block
    path.write_text(text)
    go("mod", "tidy", env={**go_env(), "GOFLAGS": "-buildvcs=false"})


def cache_key(go_version: str) -> str:
    """What a built binary depends on: the module's files and the Go version."""
    h = hashlib.sha256(go_version.encode())
    for name in ("go.mod", "go.sum", "main.go"):
        h.update((MODULE_DIR / name).read_bytes())
    return h.hexdigest()[:12]


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def binary_path(version: str | None = None, go_version: str | None = None) -> Path:
    """Where the binary for the module as it is now lives (built or not)."""
    version = version or kubernetes_version()
    go_version = go_version or check_go()
    return cache_dir() / f"{version}-{cache_key(go_version)}" / "kube"


def check_disk(*paths: Path) -> None:
    """BuildError if a cold build would fill a disk (Go's build cache or the output)."""
    for path in paths:
        probe = path
        while not probe.exists():
            probe = probe.parent
        free = shutil.disk_usage(probe).free / 2**30
        if free < MIN_FREE_GIB:
            raise BuildError(
                f"only {free:.1f} GiB free at {probe}: building the control plane needs about "
                f"{MIN_FREE_GIB:.0f} GiB (Go's build cache and modules); free some space, or "
                f"point GOCACHE / {CACHE_ENV} at a larger disk"
            )


def build(progress: bool = True) -> Built:
    """The control-plane binary: the cached one if the module is unchanged, else a fresh build
    (showing progress: a cold build on 2 cores takes tens of minutes)."""
    started = time.monotonic()
    go_version = check_go()
    version = kubernetes_version()
    target = binary_path(version, go_version)
    if target.is_file() and os.access(target, os.X_OK):
        return Built(target, version, True, time.monotonic() - started)
    check_disk(Path(go("env", "GOCACHE").strip()), target.parent)
    check_replaces(version)
    packages = len(go("list", "-deps", ".").split())
    say = (
        (lambda msg: print(f"setup: control plane: {msg}", file=sys.stderr, flush=True))
        if progress
        else (lambda msg: None)
    )
    say(
        f"building Kubernetes {version} (kube-apiserver, kube-controller-manager, kube-scheduler, "
        f"etcd, metrics-server; {packages} packages) with {go_version}; a first build takes "
        "about 4 min on 2 idle cores (longer on a busy machine), later ones reuse it"
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    minor = version.split(".")[1]
    ldflags = " ".join(
        [
            "-s -w",
            f"-X k8s.io/component-base/version.gitVersion={version}",
            "-X k8s.io/component-base/version.gitMajor=1",
            f"-X k8s.io/component-base/version.gitMinor={minor}",
            "-X k8s.io/component-base/version.gitTreeState=clean",
        ]
    )
    cmd = ["go", "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", str(partial), "."]
    proc = subprocess.Popen(
        cmd, cwd=MODULE_DIR, env=go_env(), stderr=subprocess.PIPE, text=True, bufsize=1
    )
    assert proc.stderr is not None
    compiled, shown, tail = 0, -1, []
    for line in proc.stderr:
        tail = (tail + [line.rstrip()])[-40:]
        compiled += 1
        step = min(99, compiled * 100 // max(packages, 1)) // 10
        if step > shown:
            shown = step
            say(f"{step * 10:3d} % of packages compiled ({time.monotonic() - started:.0f} s)")
    if proc.wait() != 0:
        partial.unlink(missing_ok=True)
        raise BuildError("`go build` of the control plane failed:\n" + "\n".join(tail))
    copy_metrics_server_manifests(target.parent)
    partial.replace(target)
    seconds = time.monotonic() - started
    say(f"built {target} in {seconds:.0f} s ({target.stat().st_size / 2**20:.0f} MiB)")
    return Built(target, version, False, seconds)


METRICS_SERVER = "sigs.k8s.io/metrics-server"
# Upstream's own objects for it (ServiceAccount, RBAC, APIService), from the module's source.
METRICS_SERVER_MANIFESTS = ("rbac.yaml", "apiservice.yaml")


def metrics_server_manifests(binary: Path) -> list[Path]:
    """The metrics-server manifests kept beside a built binary."""
    return [binary.parent / "metrics-server" / name for name in METRICS_SERVER_MANIFESTS]


def copy_metrics_server_manifests(folder: Path) -> None:
    """Copy metrics-server's own manifests (manifests/base in its module, the version go.mod
    pins) beside the binary, so the stack applies upstream's RBAC and APIService."""
    source = Path(go("list", "-m", "-f", "{{.Dir}}", METRICS_SERVER).strip()) / "manifests/base"
    out = folder / "metrics-server"
    out.mkdir(parents=True, exist_ok=True)
    for name in METRICS_SERVER_MANIFESTS:
        shutil.copyfile(source / name, out / name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regenerate", action="store_true", help="re-derive go.mod's replaces")
    parser.add_argument("--print-path", action="store_true", help="print the binary's path")
    args = parser.parse_args(argv)
    try:
        if args.regenerate:
            regenerate()
        built = build()
    except BuildError as e:
        print(f"setup: control plane: {e}", file=sys.stderr)
        return 1
    if args.print_path:
        print(built.binary)
    elif built.cached:
        print(
            f"setup: control plane: Kubernetes {built.version} ready ({built.binary})",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
