"""The kubelet's HTTPS endpoint on the Node's `daemonEndpoints.kubeletEndpoint.Port`: the
resource metrics metrics-server scrapes (`GET /metrics/resource`, `resource_metrics.py`), and
the logs as the API server reads them for `pods/log`:
`GET /containerLogs/<namespace>/<pod>/<container>` with `tailLines`, `timestamps`,
`limitBytes`, `sinceSeconds` and `follow`. Logs are kept in the CRI
format (`<RFC 3339 time> <stream> <tag> <line>`) and served without the stream and tag, with
the time only when asked, as the kubelet does.

The serving certificate is self-signed: the API server does not verify a kubelet's certificate
unless it is given `--kubelet-certificate-authority` (as on a default cluster).
"""

from __future__ import annotations

import datetime as dt
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from adapters.local.kubelet import resource_metrics
from adapters.local.kubelet.resource_metrics import ContainerSample
from adapters.local.process_groups import HOST

LogLookup = Callable[[str, str], "tuple[Path, Callable[[], bool]] | None"]


def cri_lines(path: Path) -> list[tuple[str, str]]:
    """(time, text) of each CRI line of a log file."""
    try:
        raw = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in raw.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4:
            out.append((parts[0], parts[3]))
        elif parts and parts[0]:
            out.append((parts[0], ""))
    return out


def render(
    lines: list[tuple[str, str]],
    *,
    tail: int | None,
    timestamps: bool,
    since_s: float | None = None,
    limit_bytes: int | None = None,
) -> bytes:
    """The body the kubelet serves for these lines and options."""
    if since_s is not None:
        cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=since_s)
        lines = [ln for ln in lines if _parse_time(ln[0]) >= cutoff]
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    body = "".join((f"{t} {text}\n" if timestamps else f"{text}\n") for t, text in lines).encode()
    return body[:limit_bytes] if limit_bytes is not None else body


def _parse_time(text: str) -> dt.datetime:
    head, _, frac = text.rstrip("Z").partition(".")
    return dt.datetime.fromisoformat(head + "." + (frac or "0")[:6].ljust(6, "0") + "+00:00")


def self_signed(folder: Path, host: str = HOST) -> tuple[Path, Path]:
    """A self-signed serving certificate and key for `host` (files in `folder`)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    cert_path, key_path = folder / "kubelet.crt", folder / "kubelet.key"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "process-kubelet")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


class LogServer:
    """One node's endpoint. `lookup(namespace, pod)` gives the pod's log file and a callable
    that is True while its container runs (for `follow`), or None (404); `metrics()` the
    node's running containers measured now (no `metrics`: no `/metrics/resource`)."""

    def __init__(
        self,
        lookup: LogLookup,
        cert_dir: Path | None = None,
        metrics: Callable[[], list[ContainerSample]] | None = None,
    ) -> None:
        self.lookup = lookup
        self.metrics = metrics
        folder = cert_dir or Path(tempfile.mkdtemp(prefix="kubelet-tls-"))
        cert, key = self_signed(folder)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet: the API server retries
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                server._serve(self)

        self.httpd = ThreadingHTTPServer((HOST, 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, daemon=True, name=f"kubelet-logs-{self.port}"
        )

    def start(self) -> LogServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        url = urlsplit(handler.path)
        if url.path == "/metrics/resource" and self.metrics is not None:
            body = resource_metrics.render(self.metrics(), int(time.time() * 1000))
            handler.send_response(200)
            handler.send_header("Content-Type", resource_metrics.CONTENT_TYPE)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return
        parts = [unquote(p) for p in url.path.split("/") if p]
        if len(parts) != 4 or parts[0] != "containerLogs":
            handler.send_error(404, "not found")
            return
        found = self.lookup(parts[1], parts[2])
        if found is None:
            handler.send_error(404, f"pod {parts[1]}/{parts[2]} not found on this node")
            return
        path, running = found
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        tail = int(q["tailLines"]) if "tailLines" in q else None
        timestamps = q.get("timestamps") in ("true", "1")
        since = float(q["sinceSeconds"]) if "sinceSeconds" in q else None
        limit = int(q["limitBytes"]) if "limitBytes" in q else None
        body = render(
            cri_lines(path), tail=tail, timestamps=timestamps, since_s=since, limit_bytes=limit
        )
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        if q.get("follow") not in ("true", "1"):
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return
        handler.end_headers()
        handler.wfile.write(body)
        seen = len(cri_lines(path))
        while running():  # follow: new lines until the container ends
            time.sleep(0.2)
            lines = cri_lines(path)
            if len(lines) > seen:
                handler.wfile.write(render(lines[seen:], tail=None, timestamps=timestamps))
                handler.wfile.flush()
                seen = len(lines)
