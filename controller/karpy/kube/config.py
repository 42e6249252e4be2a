"""Where the API server is and how to authenticate: a small kubeconfig parser and the in-cluster configuration.

Supports what a controller needs: server URL, bearer token (inline or a file that may rotate), client certificate
and key (inline base64 or files), CA (inline base64 or file) and insecure-skip-tls-verify. Exec and auth-provider
plugins are refused with a clear error rather than half-supported. Relative paths resolve against the kubeconfig's
directory, as kubectl does.
"""

from __future__ import annotations

import base64
import binascii
import os
import pathlib
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigError(Exception):
    """The kubeconfig or in-cluster environment cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class Config:
    server: str
    token: str = ""
    token_file: str = ""  # re-read periodically: projected service-account tokens rotate
    ca_file: str = ""
    ca_data: str = ""  # PEM text
    client_cert_file: str = ""
    client_key_file: str = ""
    client_cert_data: str = ""  # PEM text
    client_key_data: str = ""  # PEM text
    insecure_skip_tls_verify: bool = False
    namespace: str = "default"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for https servers (None for plain http, as the emulator serves)."""
        if not self.server.startswith("https://"):
            return None
        context = ssl.create_default_context(cafile=self.ca_file or None, cadata=self.ca_data or None)
        if self.insecure_skip_tls_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.client_cert_file or self.client_cert_data:
            _load_client_certificate(context, self)
        return context


def _load_client_certificate(context: ssl.SSLContext, config: Config) -> None:
    # ssl only loads certificate chains from files: inline data goes through a private temporary directory.
    if config.client_cert_file and (config.client_key_file or not config.client_key_data):
        context.load_cert_chain(config.client_cert_file, config.client_key_file or None)
        return
    with tempfile.TemporaryDirectory(prefix="karpy-kube-") as tmp:
        cert = pathlib.Path(config.client_cert_file) if config.client_cert_file else pathlib.Path(tmp, "cert.pem")
        key = pathlib.Path(config.client_key_file) if config.client_key_file else pathlib.Path(tmp, "key.pem")
        if config.client_cert_data:
            cert.write_text(config.client_cert_data)
        if config.client_key_data:
            key.write_text(config.client_key_data)
            os.chmod(key, 0o600)
        context.load_cert_chain(str(cert), str(key) if (config.client_key_file or config.client_key_data) else None)


def _decode(value: Any, path: str) -> str:
    try:
        return base64.b64decode(str(value), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not valid base64 PEM data ({error})") from error


def _named(entries: Any, name: str, section: str) -> Mapping[str, Any]:
    for i, entry in enumerate(entries or ()):
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{section}[{i}]: must be a mapping")
        if entry.get("name") == name:
            body = entry.get(section.rstrip("s"))
            return body if isinstance(body, Mapping) else {}
    raise ConfigError(f"{section}: no entry named {name!r}")


def _file(value: Any, base: pathlib.Path) -> str:
    if not value:
        return ""
    path = pathlib.Path(str(value)).expanduser()
    return str(path if path.is_absolute() else base / path)


def from_kubeconfig(doc: Mapping[str, Any], *, base_dir: pathlib.Path, context: str = "") -> Config:
    """A `Config` from a parsed kubeconfig document (the current context unless `context` names another)."""
    if not isinstance(doc, Mapping):
        raise ConfigError("kubeconfig: must be a mapping")
    name = context or str(doc.get("current-context") or "")
    if not name:
        raise ConfigError("current-context: not set and no context given")
    ctx = _named(doc.get("contexts"), name, "contexts")
    cluster = _named(doc.get("clusters"), str(ctx.get("cluster", "")), "clusters")
    user = _named(doc.get("users"), str(ctx.get("user", "")), "users") if ctx.get("user") else {}
    server = str(cluster.get("server") or "").rstrip("/")
    if not server:
        raise ConfigError(f"clusters[{ctx.get('cluster')!r}].cluster.server: required")
    for plugin in ("exec", "auth-provider"):
        if user.get(plugin):
            raise ConfigError(
                f"users[{ctx.get('user')!r}].user.{plugin}: credential plugins are not supported; "
                "use a token, client certificates, or run in-cluster"
            )
    users = f"users[{ctx.get('user')!r}].user"
    return Config(
        server=server,
        token=str(user.get("token") or ""),
        token_file=_file(user.get("tokenFile"), base_dir),
        ca_file=_file(cluster.get("certificate-authority"), base_dir),
        ca_data=_decode(
            cluster["certificate-authority-data"],
            f"clusters[{ctx.get('cluster')!r}].cluster.certificate-authority-data",
        )
        if cluster.get("certificate-authority-data")
        else "",
        client_cert_file=_file(user.get("client-certificate"), base_dir),
        client_key_file=_file(user.get("client-key"), base_dir),
        client_cert_data=_decode(user["client-certificate-data"], f"{users}.client-certificate-data")
        if user.get("client-certificate-data")
        else "",
        client_key_data=_decode(user["client-key-data"], f"{users}.client-key-data")
        if user.get("client-key-data")
        else "",
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify", False)),
        namespace=str(ctx.get("namespace") or "default"),
    )


def load_kubeconfig(path: str | os.PathLike[str], *, context: str = "") -> Config:
    """Read and parse a kubeconfig file (startup only: this is blocking file I/O)."""
    file = pathlib.Path(path).expanduser()
    try:
        doc = yaml.safe_load(file.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"{file}: cannot read the kubeconfig ({error})") from error
    return from_kubeconfig(doc, base_dir=file.parent, context=context)


def in_cluster(env: Mapping[str, str], *, secrets: pathlib.Path = SERVICE_ACCOUNT_DIR) -> Config:
    """The pod's own service account: KUBERNETES_SERVICE_HOST/PORT, its token file (re-read) and CA."""
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT: required in-cluster")
    token = secrets / "token"
    if not token.is_file():
        raise ConfigError(f"{token}: the service-account token is missing")
    namespace_file = secrets / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else "default"
    host = f"[{host}]" if ":" in host else host  # IPv6 service address
    ca = secrets / "ca.crt"
    return Config(
        server=f"https://{host}:{port}",
        token_file=str(token),
        ca_file=str(ca) if ca.is_file() else "",
        namespace=namespace,
    )
