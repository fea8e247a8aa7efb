"""metrics-server on the local control plane, as GKE runs it: `metrics.k8s.io` served through
the API server's aggregation layer, from each node's `/metrics/resource` (the process
kubelet's, `adapters/local/kubelet/resource_metrics.py`).

- The aggregation layer needs the front proxy: a CA and a client certificate the API server
  presents to the extension server (`--proxy-client-*`), whose CA the extension server trusts
  through the `extension-apiserver-authentication` ConfigMap the API server publishes
  (`--requestheader-*`). `write_front_proxy` makes them, as kubeadm does.
- metrics-server is the multi-call binary's `metrics-server` (sigs.k8s.io/metrics-server at
  the version go.mod pins) with upstream's deployment flags, acting as its own ServiceAccount
  (`kube-system/metrics-server`) under upstream's own RBAC and APIService
  (`manifests/base` of its module, copied beside the binary by `build.py`).
- Two local differences, both forced by having no pod network: the APIService's Service is
  an ExternalName `localhost` on metrics-server's free port (a ClusterIP needs kube-proxy), and
  metrics-server does not verify the kubelet's self-signed serving certificate
  (`--kubelet-insecure-tls`, upstream's flag for clusters without kubelet serving CAs).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

NAMESPACE, NAME = "kube-system", "metrics-server"
API_SERVICE = "v1beta1.metrics.k8s.io"
FRONT_PROXY_CLIENT = "front-proxy-client"
# Upstream's deployment (manifests/base/deployment.yaml) scrapes every 15 s.
METRIC_RESOLUTION = "15s"


@dataclass(frozen=True)
class FrontProxy:
    """The front proxy's CA and the API server's client certificate for it, and the cluster's
    client CA (`--client-ca-file`: the authentication ConfigMap names one, and extension
    servers expect it there; the local stack's clients authenticate with tokens)."""

    ca: Path
    cert: Path
    key: Path
    client_ca: Path


def write_front_proxy(folder: Path) -> FrontProxy:
    """The front-proxy CA and client certificate in ``folder`` (kept if already there)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    out = FrontProxy(
        folder / "front-proxy-ca.crt",
        folder / "front-proxy-client.crt",
        folder / "front-proxy.key",
        folder / "client-ca.crt",
    )
    if all(p.exists() for p in (out.ca, out.cert, out.key, out.client_ca)):
        return out
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)

    def self_signed_ca(common_name: str) -> tuple[Any, Any, x509.Name]:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                critical=True,
            )
            .sign(ca_key, hashes.SHA256())
        )
        return cert, ca_key, name

    ca, ca_key, ca_name = self_signed_ca("front-proxy-ca")
    client_ca, _, _ = self_signed_ca("local-client-ca")
    key = ec.generate_private_key(ec.SECP256R1())
    client = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, FRONT_PROXY_CLIENT)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    out.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out.client_ca.write_bytes(client_ca.public_bytes(serialization.Encoding.PEM))
    out.cert.write_bytes(client.public_bytes(serialization.Encoding.PEM))
    out.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    out.key.chmod(0o600)
    return out


def apiserver_flags(proxy: FrontProxy) -> list[str]:
    """The API server's aggregation-layer flags, as kubeadm sets them."""
    return [
        f"--client-ca-file={proxy.client_ca}",
        f"--requestheader-client-ca-file={proxy.ca}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-username-headers=X-Remote-User",
        f"--proxy-client-cert-file={proxy.cert}",
        f"--proxy-client-key-file={proxy.key}",
    ]


def process_args(host: str, port: int, cert_dir: Path, kubeconfig: Path) -> list[str]:
    """metrics-server's flags: upstream's deployment, bound to ``host:port``."""
    return [
        f"--bind-address={host}",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
        "--kubelet-use-node-status-port",
        f"--metric-resolution={METRIC_RESOLUTION}",
        "--kubelet-insecure-tls",
        "--v=0",
    ]


def objects(manifests: list[Path], port: int) -> list[dict[str, Any]]:
    """Upstream's objects (ServiceAccount, RBAC, APIService) with the APIService pointed at
    ``port``, and the ExternalName Service it names."""
    docs = [d for m in manifests for d in yaml.safe_load_all(m.read_text()) if d]
    for doc in docs:
        if doc["kind"] == "APIService":
            doc["spec"]["service"]["port"] = port
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "type": "ExternalName",
            "externalName": "localhost",
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        },
    }
    return [service, *docs]


def available(api_service: dict[str, Any] | None) -> bool:
    """True once the aggregator reports the APIService Available."""
    conditions = ((api_service or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)
